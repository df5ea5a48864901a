"""``dlap bench``: dlap side by side with its peers, one suite a module, the same timer for all.

- :mod:`.grid`: the solvers on a grid of families and sizes (``--suite grid``; ``--suite hard``,
  the structured families), host matrix in -> assignment out, every answer compared;
- :mod:`.batch`: ``solve_batch`` against scipy, lapx and fastlap on batches of small problems;
- :mod:`.dgs`: Deep Greedy Switching against dlap's exact solver (gaps, deadlines);
- :mod:`.deadlines`: how far past their deadlines DGS solves end, idle and with every core busy;
- :mod:`.points`: ``solve_points`` on uniform points beside the dense engine on their matrix.

Each suite appends one JSON record per run to ``--json`` and prints a markdown table;
``benchmarks/results/`` keeps the raw output of the runs the documentation cites.
"""
