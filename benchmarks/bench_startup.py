"""Start-up cost of the light core: fresh interpreters, best of ``--repeat`` wall times.

Run: ``python benchmarks/bench_startup.py [--repeat 7]``

Times ``python -c pass`` (the interpreter alone), ``import metricalc``, ``import metricalc;
metricalc.average_precision(...)`` on NumPy lists, and a rate from counts (``tpr``, which builds
no DataArray), each in a new process, and prints each time, its cost over the bare interpreter,
and the ratio to it. ``python -X importtime -c "import metricalc"`` shows where an import's time
goes.
"""

from __future__ import annotations

import subprocess
import sys
import time

from timing import integer_options

PROGRAMS = {
    "python -c pass": "pass",
    "import metricalc": "import metricalc",
    "+ average_precision": "import metricalc; metricalc.average_precision([1, 0], [0.9, 0.8])",
    "+ tpr of counts": "import metricalc; metricalc.tpr({'tp': 3, 'fn': 1})",
}


def cold_time(code: str, repeat: int) -> float:
    """Smallest wall time of ``repeat`` fresh interpreters running ``code``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    options = integer_options(__doc__ or "", repeat=7)
    bare = cold_time(PROGRAMS["python -c pass"], options.repeat)
    print(f"{'program':<22} {'seconds':>8} {'over pass':>10} {'/ pass':>7}")
    for name, code in PROGRAMS.items():
        seconds = bare if code == "pass" else cold_time(code, options.repeat)
        print(f"{name:<22} {seconds:8.3f} {seconds - bare:10.3f} {seconds / bare:7.1f}")


if __name__ == "__main__":
    main()
