"""One engine for every model call: endpoints, stored calls, runs that resume, retries, cost.

See docs/engine.md for how a protocol (generation, the judge, revision sessions...) plugs in.
"""
