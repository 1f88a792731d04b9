"""What every verb of the ``metricalc`` command shares: argument types and presets
(:mod:`~metricalc.commands.args`), the JSON rows of comparisons
(:mod:`~metricalc.commands.records`), the dask options (:mod:`~metricalc.commands.dask_options`).

It sits below the benchmarks, whose folders hold their verbs; ``metricalc.cli`` is the table of
verbs on top.
"""
