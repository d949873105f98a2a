"""The team's dashboard, ``skillreach ui``: the skills and their bars, a skill's history broken at every pin
change, the runs with their reports and each probe's trajectory, two runs compared, the agents' matrix, and
the decisions a person takes (a candidate accepted as the bar, in the same commit ``baseline accept``
writes).

It reads the store, the baselines in git (the working tree and the service branch) and the run folders,
and shows what the commands compute by calling the same functions (``baseline record``'s records,
``report``'s page, ``diff``'s paired comparison, ``run --runtime a,b``'s matrix, the live gate's shares);
it computes nothing of its own but the chart geometry. Pages are rendered on the server (Jinja2, every
text escaped and redacted, charts drawn as SVG), no script and nothing fetched from elsewhere.

- :mod:`history`: a skill's points cut into segments at every pin change, and the catalog's markers;
- :mod:`charts`: the SVG geometry of a history chart;
- :mod:`indexer`: the run folders read into the store's ``skill_points`` (one study at a time, in the
  background);
- :mod:`sources`: the store, git and the run folders, read with bounds and cached;
- :mod:`pages`: each page's view;
- :mod:`app`: the Starlette application (routes, the session token for decisions, CSRF, headers);
- :mod:`server`: uvicorn, in the foreground (``skillreach ui``) or beside the service (``serve``).
"""
