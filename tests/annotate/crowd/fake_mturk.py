"""A small Mechanical Turk requester API for tests and benchmarks, on 127.0.0.1 over real HTTP.

It speaks the protocol boto3's `mturk` client speaks (AWS JSON 1.1: a POST to `/` with the header
`X-Amz-Target: MTurkRequesterServiceV20170117.<Operation>`), keeps its state in memory, and can be
told to throttle calls or to lose the reply to a created HIT. It also plays the worker's side:
`worker_accept` / `worker_submit`, and `POST /mturk/externalSubmit` as a browser inside MTurk's
iframe would send it.

    with FakeMTurkServer() as server:
        client = boto3.client("mturk", endpoint_url=server.url, region_name="us-east-1")
"""

from __future__ import annotations

import functools
import json
import random
import re
import string
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

import botocore.loaders
from botocore.model import ServiceModel

TARGET_PREFIX = "MTurkRequesterServiceV20170117."
REVIEWED = {"Approved", "Rejected"}
# The limits MTurk documents in words rather than in its service model (so botocore knows
# nothing of them): in characters, per operation and parameter. The model's own maximums and
# patterns (ids, page sizes), which botocore does not check (only minimums), are read from it.
TEXT_LIMITS = {
    "CreateHITType": {"Title": 128, "Description": 1999, "Keywords": 999},
    "CreateHITWithHITType": {"RequesterAnnotation": 255},
    "ApproveAssignment": {"RequesterFeedback": 1024},
    "RejectAssignment": {"RequesterFeedback": 1024},
    "NotifyWorkers": {"Subject": 200, "MessageText": 4096},
}
QUESTION_MAX_BYTES = 65535
QUALIFICATIONS_MAX = 10


class FakeMTurkError(Exception):
    def __init__(self, code: str, message: str, turk_code: str = "", status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.turk_code, self.status = code, message, turk_code, status


def _request_error(message: str, turk_code: str = "") -> FakeMTurkError:
    return FakeMTurkError("RequestError", message, turk_code)


@dataclass
class FakeMTurkState:
    """Everything the fake remembers. Tests read and change it directly (under `lock`)."""

    balance: Decimal = Decimal("10000.00")
    hit_types: dict[str, dict] = field(default_factory=dict)
    hits: dict[str, dict] = field(default_factory=dict)
    hit_tokens: dict[str, str] = field(default_factory=dict)
    assignments: dict[str, dict] = field(default_factory=dict)
    bonuses: list[dict] = field(default_factory=list)
    bonus_tokens: set[str] = field(default_factory=set)
    extension_tokens: set[str] = field(default_factory=set)
    blocks: dict[str, str] = field(default_factory=dict)
    notifications: list[dict] = field(default_factory=list)
    external_submits: list[dict] = field(default_factory=list)
    refused_submits: list[dict] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    # Fault injection: a share of calls answered with ThrottlingException (seeded), queued errors
    # per operation, and a number of CreateHITWithHITType replies to lose after creating the HIT.
    throttle_rate: float = 0.0
    throttle_rng: random.Random = field(default_factory=lambda: random.Random(7))
    throttled: int = 0
    queued_errors: dict[str, list[FakeMTurkError]] = field(default_factory=dict)
    lose_create_replies: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)


def _new_id(rng: random.Random, length: int = 30, prefix: str = "") -> str:
    alphabet = string.ascii_uppercase + string.digits
    return prefix + "".join(rng.choice(alphabet) for _ in range(length - len(prefix)))


class FakeMTurkApi:
    """The operations, as plain methods taking and returning the JSON bodies."""

    def __init__(self, state: FakeMTurkState) -> None:
        self.state = state
        self.rng = random.Random(11)

    def call(self, operation: str, body: dict) -> dict:
        state = self.state
        with state.lock:
            state.calls.append(operation)
            queued = state.queued_errors.get(operation)
            if queued:
                raise queued.pop(0)
            if state.throttle_rate and state.throttle_rng.random() < state.throttle_rate:
                state.throttled += 1
                raise FakeMTurkError("ThrottlingException", "Rate exceeded")
            handler = getattr(self, f"op_{operation}", None)
            if handler is None:
                raise FakeMTurkError("UnknownOperationException", f"{operation} is not faked")
            _limits_check(operation, body)
            return handler(body)

    # --- Account and HITs ----------------------------------------------------------------

    def op_GetAccountBalance(self, body: dict) -> dict:
        return {"AvailableBalance": f"{self.state.balance:.2f}", "OnHoldBalance": "0.00"}

    def op_CreateHITType(self, body: dict) -> dict:
        for name in ("AssignmentDurationInSeconds", "Reward", "Title", "Description"):
            if name not in body:
                raise FakeMTurkError("ValidationException", f"{name} is required")
        Decimal(body["Reward"])  # a malformed amount fails the call, as on MTurk
        key = json.dumps(body, sort_keys=True)
        for type_id, params in self.state.hit_types.items():
            if params["_key"] == key:
                return {"HITTypeId": type_id}
        type_id = _new_id(self.rng)
        self.state.hit_types[type_id] = {**body, "_key": key}
        return {"HITTypeId": type_id}

    def op_CreateHITWithHITType(self, body: dict) -> dict:
        state = self.state
        token = body.get("UniqueRequestToken")
        if token and token in state.hit_tokens:
            raise _request_error(
                "There is already a HIT which exists with the same `UniqueRequestToken`.",
                "AWS.MechanicalTurk.HitAlreadyExists",
            )
        hit_type = state.hit_types.get(body["HITTypeId"])
        if hit_type is None:
            raise _request_error(f"Hit type {body['HITTypeId']} does not exist.")
        now = time.time()
        hit_id = _new_id(self.rng)
        hit = {
            "HITId": hit_id,
            "HITTypeId": body["HITTypeId"],
            "HITGroupId": body["HITTypeId"],
            "CreationTime": now,
            "Title": hit_type["Title"],
            "Description": hit_type["Description"],
            "Question": body.get("Question", ""),
            "Keywords": hit_type.get("Keywords", ""),
            "HITStatus": "Assignable",
            "MaxAssignments": body.get("MaxAssignments", 1),
            "Reward": hit_type["Reward"],
            "AutoApprovalDelayInSeconds": hit_type.get("AutoApprovalDelayInSeconds", 2592000),
            "Expiration": now + body["LifetimeInSeconds"],
            "AssignmentDurationInSeconds": hit_type["AssignmentDurationInSeconds"],
            "RequesterAnnotation": body.get("RequesterAnnotation", ""),
            "QualificationRequirements": hit_type.get("QualificationRequirements", []),
            "HITReviewStatus": "NotReviewed",
        }
        state.hits[hit_id] = hit
        if token:
            state.hit_tokens[token] = hit_id
        if state.lose_create_replies > 0:
            state.lose_create_replies -= 1
            raise FakeMTurkError("ServiceUnavailable", "Service unavailable", status=503)
        return {"HIT": self._hit_view(hit)}

    def _hit(self, hit_id: str) -> dict:
        hit = self.state.hits.get(hit_id)
        if hit is None:
            raise _request_error(f"Hit {hit_id} does not exist.")
        return hit

    def _hit_view(self, hit: dict) -> dict:
        mine = [a for a in self.state.assignments.values() if a["HITId"] == hit["HITId"]]
        pending = sum(a["AssignmentStatus"] == "Accepted" for a in mine)
        completed = sum(a["AssignmentStatus"] in REVIEWED | {"Submitted"} for a in mine)
        taken = [a for a in mine if a["AssignmentStatus"] != "Returned"]
        status = hit["HITStatus"]
        if status == "Assignable" and hit["Expiration"] <= time.time():
            status = "Reviewable" if not pending else "Unassignable"
        return {
            **hit,
            "HITStatus": status,
            "NumberOfAssignmentsPending": pending,
            "NumberOfAssignmentsCompleted": completed,
            "NumberOfAssignmentsAvailable": max(hit["MaxAssignments"] - len(taken), 0),
        }

    def op_GetHIT(self, body: dict) -> dict:
        return {"HIT": self._hit_view(self._hit(body["HITId"]))}

    def op_ListHITs(self, body: dict) -> dict:
        hits = sorted(self.state.hits.values(), key=lambda h: (h["CreationTime"], h["HITId"]))
        page, next_token = _page(hits, body)
        return {
            "HITs": [self._hit_view(h) for h in page],
            "NumResults": len(page),
            **next_token,
        }

    def op_UpdateExpirationForHIT(self, body: dict) -> dict:
        self._hit(body["HITId"])["Expiration"] = float(body["ExpireAt"])
        return {}

    def op_CreateAdditionalAssignmentsForHIT(self, body: dict) -> dict:
        """MTurk's rules: a token used before is refused (the request is not done twice); a HIT
        made with fewer than 10 assignments cannot be extended to 10 or more."""
        hit = self._hit(body["HITId"])
        count = body.get("NumberOfAdditionalAssignments", 0)
        token = body.get("UniqueRequestToken")
        if token and token in self.state.extension_tokens:
            raise _request_error(f'The idempotency token "{token}" has already been processed.')
        if count < 1:
            raise FakeMTurkError("ValidationException", "NumberOfAdditionalAssignments >= 1")
        if hit["MaxAssignments"] < 10 <= hit["MaxAssignments"] + count:
            raise _request_error(
                "HITs created with fewer than 10 assignments cannot be extended to have 10 or "
                "more assignments.",
                "AWS.MechanicalTurk.InvalidMaximumAssignmentsIncrease",
            )
        hit["MaxAssignments"] += count
        if token:
            self.state.extension_tokens.add(token)
        return {}

    def op_DeleteHIT(self, body: dict) -> dict:
        hit = self._hit(body["HITId"])
        view = self._hit_view(hit)
        mine = [a for a in self.state.assignments.values() if a["HITId"] == hit["HITId"]]
        if view["HITStatus"] == "Assignable" or any(
            a["AssignmentStatus"] not in REVIEWED for a in mine
        ):
            raise _request_error(
                "This HIT is currently in the state 'Assignable' or has assignments that are "
                "not approved or rejected. This operation can be called with a status of: "
                "Reviewing, Reviewable"
            )
        del self.state.hits[hit["HITId"]]
        return {}

    # --- Assignments ---------------------------------------------------------------------

    def op_ListAssignmentsForHIT(self, body: dict) -> dict:
        """Only submitted work is visible to the requester (an accepted assignment is not)."""
        self._hit(body["HITId"])
        wanted = set(body.get("AssignmentStatuses") or ["Submitted", "Approved", "Rejected"])
        if not wanted <= {"Submitted", "Approved", "Rejected"}:
            raise FakeMTurkError(
                "ValidationException", "AssignmentStatuses: Submitted, Approved or Rejected"
            )
        rows = [
            a
            for a in self.state.assignments.values()
            if a["HITId"] == body["HITId"] and a["AssignmentStatus"] in wanted
        ]
        rows.sort(key=lambda a: (a["AcceptTime"], a["AssignmentId"]))
        page, next_token = _page(rows, body)
        return {"Assignments": [dict(a) for a in page], "NumResults": len(page), **next_token}

    def _assignment(self, assignment_id: str) -> dict:
        row = self.state.assignments.get(assignment_id)
        if row is None or row["AssignmentStatus"] in ("Accepted", "Returned"):
            raise _request_error(f"Assignment {assignment_id} does not exist.")
        return row

    def op_GetAssignment(self, body: dict) -> dict:
        row = self._assignment(body["AssignmentId"])
        return {"Assignment": dict(row), "HIT": self._hit_view(self._hit(row["HITId"]))}

    def op_ApproveAssignment(self, body: dict) -> dict:
        row = self._assignment(body["AssignmentId"])
        allowed = {"Submitted"} | ({"Rejected"} if body.get("OverrideRejection") else set())
        if row["AssignmentStatus"] not in allowed:
            raise _request_error(
                f"This operation can be called with a status of: Submitted "
                f"(assignment is {row['AssignmentStatus']})."
            )
        row.update(AssignmentStatus="Approved", ApprovalTime=time.time())
        if body.get("RequesterFeedback"):
            row["RequesterFeedback"] = body["RequesterFeedback"]
        return {}

    def op_RejectAssignment(self, body: dict) -> dict:
        row = self._assignment(body["AssignmentId"])
        if not body.get("RequesterFeedback"):
            raise FakeMTurkError("ValidationException", "RequesterFeedback is required")
        if row["AssignmentStatus"] != "Submitted":
            raise _request_error("This operation can be called with a status of: Submitted.")
        row.update(
            AssignmentStatus="Rejected",
            RejectionTime=time.time(),
            RequesterFeedback=body["RequesterFeedback"],
        )
        return {}

    # --- Workers -------------------------------------------------------------------------

    def op_SendBonus(self, body: dict) -> dict:
        token = body.get("UniqueRequestToken")
        if token and token in self.state.bonus_tokens:
            raise _request_error(f'The idempotency token "{token}" has already been processed.')
        row = self._assignment(body["AssignmentId"])
        if row["WorkerId"] != body["WorkerId"]:
            raise _request_error("The worker did not work on this assignment.")
        amount = Decimal(body["BonusAmount"])
        if amount > self.state.balance:
            raise _request_error(
                "You do not have enough funds.", "AWS.MechanicalTurk.InsufficientFunds"
            )
        self.state.balance -= amount
        if token:
            self.state.bonus_tokens.add(token)
        self.state.bonuses.append(dict(body))
        return {}

    def op_ListBonusPayments(self, body: dict) -> dict:
        rows = [
            {key: bonus[key] for key in ("WorkerId", "AssignmentId", "BonusAmount", "Reason")}
            for bonus in self.state.bonuses
            if bonus["AssignmentId"] == body.get("AssignmentId")
        ]
        page, next_token = _page(rows, body)
        return {"BonusPayments": page, "NumResults": len(page), **next_token}

    def op_CreateWorkerBlock(self, body: dict) -> dict:
        if not body.get("Reason"):
            raise FakeMTurkError("ValidationException", "Reason is required")
        self.state.blocks[body["WorkerId"]] = body["Reason"]
        return {}

    def op_DeleteWorkerBlock(self, body: dict) -> dict:
        self.state.blocks.pop(body["WorkerId"], None)
        return {}

    def op_ListWorkerBlocks(self, body: dict) -> dict:
        rows = [{"WorkerId": w, "Reason": r} for w, r in sorted(self.state.blocks.items())]
        page, next_token = _page(rows, body)
        return {"WorkerBlocks": page, "NumResults": len(page), **next_token}

    def op_NotifyWorkers(self, body: dict) -> dict:
        if not 1 <= len(body["WorkerIds"]) <= 100:
            raise FakeMTurkError("ValidationException", "WorkerIds must hold 1 to 100 ids")
        self.state.notifications.append(dict(body))
        return {"NotifyWorkersFailureStatuses": []}

    # --- The worker's side (not part of the requester API) -----------------------------

    def worker_accept(self, hit_id: str, worker_id: str) -> str:
        with self.state.lock:
            view = self._hit_view(self._hit(hit_id))
            if view["HITStatus"] != "Assignable" or not view["NumberOfAssignmentsAvailable"]:
                raise ValueError(f"HIT {hit_id} cannot be accepted ({view['HITStatus']})")
            if worker_id in self.state.blocks:
                raise ValueError(f"worker {worker_id} is blocked")
            if any(
                a["HITId"] == hit_id
                and a["WorkerId"] == worker_id
                and a["AssignmentStatus"] != "Returned"
                for a in self.state.assignments.values()
            ):
                raise ValueError(f"worker {worker_id} already took HIT {hit_id}")
            assignment_id = _new_id(self.rng)
            now = time.time()
            self.state.assignments[assignment_id] = {
                "AssignmentId": assignment_id,
                "WorkerId": worker_id,
                "HITId": hit_id,
                "AssignmentStatus": "Accepted",
                "AcceptTime": now,
                "Deadline": now + view["AssignmentDurationInSeconds"],
            }
            return assignment_id

    def worker_return(self, assignment_id: str) -> None:
        """The worker gives the HIT back unfinished: MTurk frees the slot, and the same worker
        may accept the HIT again (a new assignment id)."""
        with self.state.lock:
            row = self.state.assignments.get(assignment_id)
            if row is None or row["AssignmentStatus"] != "Accepted":
                raise ValueError(f"assignment {assignment_id} is not open")
            row["AssignmentStatus"] = "Returned"

    def worker_submit(self, assignment_id: str, fields: dict[str, str]) -> None:
        with self.state.lock:
            row = self.state.assignments.get(assignment_id)
            if row is None or row["AssignmentStatus"] != "Accepted":
                raise ValueError(f"assignment {assignment_id} is not open")
            now = time.time()
            row.update(
                AssignmentStatus="Submitted",
                SubmitTime=now,
                AutoApprovalTime=now + 2592000,
                Answer=_answer_xml(fields),
            )


@functools.cache
def _service_model() -> ServiceModel:
    loader = botocore.loaders.create_loader()
    return ServiceModel(loader.load_service_model("mturk", "service-2"), "mturk")


def _refused(name: str, value, constraint: str) -> FakeMTurkError:
    """A ValidationException worded as AWS words one (botocore receives it as a ClientError)."""
    shown = value if len(str(value)) <= 60 else f"{str(value)[:57]}..."
    return FakeMTurkError(
        "ValidationException",
        f"1 validation error detected: Value '{shown}' at '{name[0].lower()}{name[1:]}' failed "
        f"to satisfy constraint: Member must {constraint}",
    )


def _limits_check(operation: str, body: dict) -> None:
    """Refuse a call whose parameters break MTurk's limits, before it does anything: the service
    model's lengths, ranges and patterns of each parameter, then the limits MTurk documents in
    words (TEXT_LIMITS, QUESTION_MAX_BYTES, QUALIFICATIONS_MAX)."""
    shape = _service_model().operation_model(operation).input_shape
    for name, member in (shape.members if shape else {}).items():
        value = body.get(name)
        if value is None:
            continue
        rules = member.metadata
        if member.type_name == "string":
            broken = _string_broken(member, value)
            if broken:
                raise _refused(name, value, broken[0])
        elif member.type_name == "list" and member.member.type_name == "string":
            # AWS names every rule a list's member breaks, the list shown whole.
            broken = [rule for item in value for rule in _string_broken(member.member, item)]
            if broken:
                shown = f"[{', '.join(value)}]"
                rules_broken = ", ".join(dict.fromkeys(f"Member must {rule}" for rule in broken))
                raise _refused(name, shown, f"satisfy constraint: [{rules_broken}]")
        elif member.type_name == "integer":
            low, high = rules.get("min", value), rules.get("max", value)
            if not low <= value <= high:
                raise _refused(name, value, f"be between {low} and {high}")
    for name, most in TEXT_LIMITS.get(operation, {}).items():
        if len(body.get(name) or "") > most:
            raise _refused(name, body[name], f"have length less than or equal to {most}")
    if len((body.get("Question") or "").encode()) > QUESTION_MAX_BYTES:
        raise _refused("Question", "...", f"be at most {QUESTION_MAX_BYTES} bytes")
    if len(body.get("QualificationRequirements") or []) > QUALIFICATIONS_MAX:
        raise _refused(
            "QualificationRequirements",
            body["QualificationRequirements"],
            f"have length less than or equal to {QUALIFICATIONS_MAX}",
        )


def _string_broken(shape, value: str) -> list[str]:
    """The rules of the service model's string `shape` that `value` breaks, worded as AWS
    words them after "Member must" (MTurk's ids: CustomerId, EntityId)."""
    rules, broken = shape.metadata, []
    if "max" in rules and len(value) > rules["max"]:
        broken.append(f"have length less than or equal to {rules['max']}")
    if "pattern" in rules and not re.search(rules["pattern"], value):
        broken.append(f"satisfy regular expression pattern: {rules['pattern']}")
    return broken


def _page(rows: list, body: dict) -> tuple[list, dict]:
    start = int(body.get("NextToken") or 0)
    size = min(int(body.get("MaxResults") or 10), 100)
    page = rows[start : start + size]
    more = start + size < len(rows)
    return page, ({"NextToken": str(start + size)} if more else {})


def _answer_xml(fields: dict[str, str]) -> str:
    answers = "".join(
        f"<Answer><QuestionIdentifier>{escape(k)}</QuestionIdentifier>"
        f"<FreeText>{escape(v)}</FreeText></Answer>"
        for k, v in fields.items()
        if k != "assignmentId"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>'
        '<QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/'
        'AWSMechanicalTurkDataSchemas/2005-10-01/QuestionFormAnswers.xsd">'
        f"{answers}</QuestionFormAnswers>"
    )


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # quiet
        return

    def do_GET(self) -> None:
        """`/frame?src=<url>`: a stand-in for MTurk's worker page, framing the task like MTurk."""
        parts = urlsplit(self.path)
        src = dict(parse_qsl(parts.query)).get("src", "")
        if parts.path != "/frame" or not src.startswith(("http://", "https://")):
            self.send_error(404)
            return
        body = (
            "<!doctype html><title>Fake MTurk</title><h1>HIT</h1>"
            f'<iframe id="hit-frame" src="{escape(src, {chr(34): "&quot;"})}" '
            'style="width:100%;height:900px"></iframe>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if urlsplit(self.path).path.rstrip("/") == "/mturk/externalSubmit":
            self._external_submit(raw)
            return
        target = self.headers.get("X-Amz-Target", "")
        if not target.startswith(TARGET_PREFIX):
            self._json(400, {"__type": "UnknownOperationException", "Message": target})
            return
        if not self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256"):
            self._json(400, {"__type": "MissingAuthenticationTokenException"})
            return
        try:
            body = json.loads(raw or b"{}")
            result = self.server.api.call(target[len(TARGET_PREFIX) :], body)
        except FakeMTurkError as error:
            payload = {"__type": error.code, "Message": error.message}
            if error.turk_code:
                payload["TurkErrorCode"] = error.turk_code
            self._json(error.status, payload)
            return
        except (KeyError, ValueError) as error:
            self._json(400, {"__type": "ValidationException", "Message": repr(error)})
            return
        self._json(200, result)

    def _external_submit(self, raw: bytes) -> None:
        """MTurk takes the hand-back only for an assignment a worker accepted and still holds."""
        fields = dict(parse_qsl(raw.decode(), keep_blank_values=True))
        api = self.server.api
        with api.state.lock:
            row = api.state.assignments.get(fields.get("assignmentId", ""))
            accepted = row is not None and row["AssignmentStatus"] == "Accepted"
            if accepted:
                api.state.external_submits.append(fields)
                api.worker_submit(row["AssignmentId"], fields)
            else:
                api.state.refused_submits.append(fields)
        if accepted:
            status, body = 200, b"<!doctype html><title>Submitted</title><p>HIT submitted.</p>"
        else:
            status, body = (
                400,
                (
                    b"<!doctype html><title>Error</title><p>There was a problem submitting your "
                    b"results for this HIT: this assignment is not yours or no longer open.</p>"
                ),
            )
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("x-amzn-RequestId", _new_id(random.Random(), 36))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: FakeMTurkApi


class FakeMTurkServer:
    """Serve a FakeMTurkApi on 127.0.0.1 (an OS-chosen port) in a background thread."""

    def __init__(self) -> None:
        self.state = FakeMTurkState()
        self.api = FakeMTurkApi(self.state)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self.api
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    def start(self) -> FakeMTurkServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeMTurkServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def forget_tokens(self) -> None:
        """A day later: MTurk forgets every UniqueRequestToken after 24 hours, so a request
        sent again with one is done again (a HIT made, assignments added, a bonus paid)."""
        with self.state.lock:
            self.state.hit_tokens.clear()
            self.state.extension_tokens.clear()
            self.state.bonus_tokens.clear()

    def fail_next(self, operation: str, code: str, message: str = "", status: int = 400) -> None:
        """Answer the next call of `operation` with the given error."""
        with self.state.lock:
            self.state.queued_errors.setdefault(operation, []).append(
                FakeMTurkError(code, message or code, status=status)
            )
