"""``skillreach serve``: the local Prefect server, the process work pool, the deployments of
``prefect.yaml``, the alert automations and the global rate limits every worker draws on.
"""
