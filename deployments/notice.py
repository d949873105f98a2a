"""One alert about the service itself, filed the way every alert is: ``python -m
skillreach.deployments.notice PAYLOAD_JSON``.

``serve`` runs it (a child process with the service's environment, so the store, the webhooks and the
study configuration are the flow runs' own) when it restarts the server or the worker it supervises: the
payload goes through :func:`skillreach.tasks.alerts.deliver_alerts` like a gate's notice — stored, posted
to the webhooks, repeats and mutes as for any alert. Prints what became of it (one JSON line).
"""

from __future__ import annotations

import asyncio
import json
import sys

__all__ = ["SERVICE_RESTARTED", "main", "restart_payload"]

SERVICE_RESTARTED = "skillreach.service.restarted"


def restart_payload(what: str, *, folder: str, ui: str, old_pid: int, code: int | None, pid: int,
                    at: str) -> dict[str, object]:
    """The notice of one restart (``what``: ``worker`` or ``server``): each restart is its own alert."""
    from skillreach.service.alerts import notice_payload

    ended = f"exited with code {code}" if code is not None else "exited"
    message = (f"serve restarted the {what} at {at} (pid {old_pid} {ended}; now pid {pid}); the service "
               f"in {folder} kept running — see its log (.skillreach/logs/{what}.log)")
    return notice_payload(SERVICE_RESTARTED, skill="service", metric=what, message=message, run_link=ui,
                          instance=f"{what}-{old_pid}-{at}")


def main(argv: list[str] | None = None) -> int:
    payload = json.loads((argv if argv is not None else sys.argv[1:])[0])
    import os

    from skillreach.tasks.alerts import deliver_alerts
    from skillreach.tasks.config import CONFIG_ENV, example_config, service_environment

    config = service_environment() if os.environ.get(CONFIG_ENV) else example_config()
    said = asyncio.run(deliver_alerts.fn(config, None, [payload]))
    print(json.dumps({"delivery": said}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
