"""`coderun serve`: verdicts over HTTP, from a process that stays up (a reward for RL training).

    engine.py   tasks, projects, warm worker pools, a bounded queue; each (task, code) judged as eval does
    store.py    every accepted request and verdict in sqlite (WAL), committed before it is acknowledged
    app.py      the FastAPI routes, the token and size checks, the 4xx messages
    metrics.py  Prometheus text
    server.py   binding and running (uvicorn)
    client.py   a Python client (sync and async) and reward functions for TRL and verl

fastapi and uvicorn come with the `serve` extra: app.py and server.py import them, nothing else here does.
"""

DEFAULT_PORT = 8431
