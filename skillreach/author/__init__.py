"""The questions a skill author asks: what an edit changed (``diff``), how many skills a catalog holds
before routing degrades (``sweep``), which skills crowd each other (``cluster``), a better
description (``optimize``) and what a skill adds to task quality (``uplift``). Each module is
imported by path (they load numpy, scipy, networkx or Jinja2).
"""

