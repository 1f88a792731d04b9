"""Draw docs/_static/synthetic_examples.png: images 1..6 of a few synthetic scenes.

Run once from the repository root (the figure is committed; re-run after changing the generator)::

    python docs/_static/make_synthetic_examples.py

Rows: i_astronaut, v_astronaut, i_camera, v_camera, i_coffee, v_brick (seed 0). On v_ scenes the
outline of image 1 mapped by H_1_k is drawn in red. The PNG is palette-quantised to stay small.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from PIL import Image

from metricalc.datasets.sequences import make_synthetic_dataset

ROWS = ("i_astronaut", "v_astronaut", "i_camera", "v_camera", "i_coffee", "v_brick")
OUT = Path(__file__).with_name("synthetic_examples.png")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        sequences = {s.name: s for s in make_synthetic_dataset(tmp, scenes=ROWS, seed=0, size=256)}
        fig, axes = plt.subplots(len(ROWS), 6, figsize=(9.0, 1.62 * len(ROWS)), dpi=100)
        for row, name in zip(axes, ROWS, strict=True):
            seq = sequences[name]
            height, width = seq.shape(1)
            corners = np.array(
                [
                    [0, 0, 1],
                    [width - 1, 0, 1],
                    [width - 1, height - 1, 1],
                    [0, height - 1, 1],
                    [0, 0, 1],
                ],
                dtype=float,
            ).T
            for k, ax in enumerate(row, start=1):
                image = seq.image(k)
                ax.imshow(image, cmap="gray" if image.ndim == 2 else None, vmin=0, vmax=255)
                if seq.split == "viewpoint" and k > 1:
                    p = seq.homography(k) @ corners
                    ax.plot(p[0] / p[2], p[1] / p[2], color="red", linewidth=0.8)
                    ax.set_xlim(-0.5, width - 0.5)
                    ax.set_ylim(height - 0.5, -0.5)
                ax.set_xticks([])
                ax.set_yticks([])
                if k == 1:
                    ax.set_ylabel(name, fontsize=8)
                if name == ROWS[0]:
                    ax.set_title(f"image {k}", fontsize=8)
        fig.tight_layout(pad=0.3, h_pad=0.2, w_pad=0.2)
        tmp_png = Path(tmp) / "figure.png"
        fig.savefig(tmp_png)
        plt.close(fig)
        image = Image.open(tmp_png).convert("RGB").quantize(colors=256, method=Image.MEDIANCUT)
        partial = OUT.with_name(f".{OUT.name}.tmp")
        image.save(partial, format="PNG", optimize=True)
        partial.replace(OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
