"""A stub OpenAI-compatible server on 127.0.0.1 over real HTTP, for the real `openai` client.

POST /v1/embeddings answers with tiny word-count vectors (for dense retrieval); POST
/v1/chat/completions answers with scripted replies (a list consumed in order, or a function
of the messages, else "YES"; a scripted reply may be a dict with content, finish_reason and
system_fingerprint, to script truncated or content-filtered replies; None answers with
`"content": null` and Fail(status) answers that request with an error), records every request
body (parsed, and as the bytes received), and can be told to fail the next requests with a
status (429, 500, 400...) and a Retry-After header, to wait before answering, and to leave
`usage` out. A request with `"stream": true` is answered with server-sent events, as OpenAI
does: the reply a word at a time, then a chunk with the finish_reason, then (with
`stream_options.include_usage`) a chunk with only `usage`, then `data: [DONE]`; `stream_gate(n)`
is called before the n-th event (from 0) is sent, so a test can hold a stream half-way, and
`break_stream_after = n` closes the connection after n events (a broken stream). Run it alone with `python tests/evaluation/openai_stub.py --delay 0.1`
(prints its base URL) for the benchmark.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class StreamReply:
    """The chunks of a streamed completion (sent as server-sent events, then [DONE])."""

    chunks: list[dict]


@dataclass(frozen=True)
class Fail:
    """A scripted reply that is an HTTP error instead of a completion."""

    status: int
    message: str = ""


class StubOpenAI:
    def __init__(
        self,
        *,
        replies: list[str | dict | None | Fail] | None = None,
        responder: Callable[[list[dict]], str | dict] | None = None,
        delay: float = 0.0,
        usage: bool = True,
        on_request: Callable[[int], None] | None = None,
        stream_gate: Callable[[int], None] | None = None,
    ) -> None:
        self.replies = deque(replies or [])
        self.responder = responder
        self.delay = delay
        self.usage = usage
        self.on_request = on_request
        self.stream_gate = stream_gate
        self.break_stream_after: int | None = None
        self.requests: list[dict] = []  # every body received, failed ones included
        self.raw_requests: list[bytes] = []  # the same bodies, as the bytes received
        self.authorizations: list[str] = []  # the Authorization header of each request
        self.answered: list[dict] = []  # bodies that got a 200
        self.usages: list[dict] = []  # the usage returned with each 200
        self.failures: deque[tuple[int, dict[str, str], str]] = deque()
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    # --- scripting -----------------------------------------------------------------------------
    def fail_next(
        self, status: int, *, times: int = 1, retry_after: str | None = None, message: str = ""
    ) -> None:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        for _ in range(times):
            self.failures.append((status, headers, message or f"stub error {status}"))

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    # --- serving -------------------------------------------------------------------------------
    def start(self) -> StubOpenAI:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Buffer the reply so that its headers and body leave in one write (the handler
            # flushes after each request), as a production server sends a small reply: in two
            # writes the client needs two reads for each, and Nagle plus delayed ACKs could hold
            # the second back by 40 ms.
            wbufsize = 64 * 1024
            disable_nagle_algorithm = True

            def log_message(self, format, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                body = json.loads(raw or b"{}")
                with stub.lock:
                    stub.authorizations.append(self.headers.get("Authorization", ""))
                    stub.raw_requests.append(raw)
                status, headers, payload = stub.handle(self.path, body)
                if isinstance(payload, StreamReply):
                    self.stream(payload)
                    return
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def stream(self, reply: StreamReply) -> None:
                self.close_connection = True  # the end of the body is the end of the stream
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.flush()
                events = [json.dumps(chunk) for chunk in reply.chunks] + ["[DONE]"]
                for index, event in enumerate(events):
                    if stub.break_stream_after is not None and index >= stub.break_stream_after:
                        return
                    if stub.stream_gate:
                        stub.stream_gate(index)
                    self.wfile.write(f"data: {event}\n\n".encode())
                    self.wfile.flush()

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # the default 5 drops connections of a 32-thread client
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def __enter__(self) -> StubOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def handle(self, path: str, body: dict) -> tuple[int, dict[str, str], dict]:
        with self.lock:
            self.requests.append(body)
            count = len(self.requests)
            failure = self.failures.popleft() if self.failures else None
        if self.on_request:
            self.on_request(count)
        if path.rstrip("/") not in ("/v1/embeddings", "/v1/chat/completions"):
            return 404, {}, {"error": {"message": f"no route {path}", "type": "not_found"}}
        if failure:
            return self._error(*failure)
        if path.rstrip("/") == "/v1/embeddings":
            with self.lock:
                self.answered.append(body)
            return 200, {}, self.embeddings(body)
        if self.delay:
            time.sleep(self.delay)
        messages = body.get("messages", [])
        with self.lock:
            if self.replies:
                text = self.replies.popleft()
            elif self.responder:
                text = self.responder(messages)
            else:
                text = "YES"
        if isinstance(text, Fail):
            return self._error(text.status, {}, text.message or f"stub error {text.status}")
        reply = text if isinstance(text, dict) else {"content": text}
        text = reply.get("content") or ""
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        usage = {
            "prompt_tokens": 10 + prompt_chars // 5,
            "completion_tokens": 1 + len(text or "") // 5,
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        payload = {
            "id": f"chatcmpl-stub-{count}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.get("content")},
                    "finish_reason": reply.get("finish_reason", "stop"),
                }
            ],
        }
        if reply.get("system_fingerprint"):
            payload["system_fingerprint"] = reply["system_fingerprint"]
        if self.usage:
            payload["usage"] = usage
        with self.lock:
            self.answered.append(body)
            if self.usage:
                self.usages.append(usage)
        if body.get("stream"):
            return 200, {}, self._stream(payload, body)
        return 200, {}, payload

    @staticmethod
    def _stream(payload: dict, body: dict) -> StreamReply:
        """Cut a completion into the chunks OpenAI streams: a word of content each, then the
        finish_reason, then usage alone (when asked for with stream_options.include_usage)."""
        head = {key: payload[key] for key in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"
        if payload.get("system_fingerprint"):
            head["system_fingerprint"] = payload["system_fingerprint"]
        choice = payload["choices"][0]
        text = choice["message"]["content"] or ""
        words = re.findall(r"\s*\S+", text) or [text]
        words[-1] += text[len("".join(words)) :]
        chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
        chunks += [
            {**head, "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
            for word in words
            if word
        ]
        chunks.append(
            {
                **head,
                "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}],
            }
        )
        if (body.get("stream_options") or {}).get("include_usage") and payload.get("usage"):
            chunks.append({**head, "choices": [], "usage": payload["usage"]})
        return StreamReply(chunks)

    @staticmethod
    def _error(status: int, headers: dict[str, str], message: str):
        return status, headers, {"error": {"message": message, "type": "stub", "code": None}}

    def embeddings(self, body: dict) -> dict:
        """POST /v1/embeddings: a 3-number vector per text, counting the words "a", "b", "c"."""
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        data = [
            {
                "object": "embedding",
                "index": index,
                "embedding": [float(text.lower().split().count(w)) for w in ("a", "b", "c")],
            }
            for index, text in enumerate(texts)
        ]
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", "stub"),
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.1)
    args = parser.parse_args()
    stub = StubOpenAI(delay=args.delay).start()
    print(stub.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        stub.stop()


if __name__ == "__main__":
    main()
