"""COCO datasets of odd shapes for the detection and decomposition tests."""

from __future__ import annotations

import numpy as np


def odd_dataset(seed: int) -> tuple[dict, list]:
    """Shapes the generator avoids: empty, sub-pixel and huge boxes, areas on the range bounds,
    crowd-only images, up to 400 detections per image (maxDets saturates), up to 40
    categories, rounded coordinates and scores (ties), duplicates of exact boxes."""
    rng = np.random.default_rng(seed)
    n_cat = int(rng.integers(1, 41))
    images = [{"id": i + 1, "height": int(rng.integers(20, 200)),
               "width": int(rng.integers(20, 200))} for i in range(int(rng.integers(1, 6)))]

    def sides() -> float:
        return float(rng.choice([0, 0.5, 1, 2, rng.uniform(1, 60), rng.uniform(30, 150)]))

    annotations, results = [], []
    for image in images:
        crowd_only = rng.random() < 0.3
        objects = []
        for _ in range(int(rng.poisson(rng.choice([1, 5, 40])))):
            box = [float(rng.uniform(-5, image["width"])), float(rng.uniform(-5, image["height"])),
                   sides(), sides()]
            box = [float(round(v)) for v in box] if rng.random() < 0.5 else box
            area = float(rng.choice([box[2] * box[3], rng.uniform(0, 2e4), 32**2, 96**2, 0]))
            objects.append({"id": len(annotations) + len(objects) + 1, "image_id": image["id"],
                            "category_id": int(rng.integers(1, n_cat + 1)), "bbox": box,
                            "area": area, "iscrowd": int(crowd_only or rng.random() < 0.1)})
        annotations += objects
        for _ in range(int(rng.choice([0, 3, 30, 150, 400]))):
            if objects and rng.random() < 0.7:
                target = objects[int(rng.integers(len(objects)))]
                x, y, w, h = target["bbox"]
                j = rng.normal(0, rng.choice([0, 0.05, 0.3]), 4)
                box = [x + j[0] * max(w, 1), y + j[1] * max(h, 1), max(0.0, w * (1 + j[2])),
                       max(0.0, h * (1 + j[3]))]
                category = (target["category_id"] if rng.random() < 0.8
                            else int(rng.integers(1, n_cat + 1)))
            else:
                box = [float(v) for v in rng.uniform(0, [image["width"], image["height"], 80, 80])]
                category = int(rng.integers(1, n_cat + 1))
            box = [float(round(v)) for v in box] if rng.random() < 0.3 else box
            score = float(rng.choice([rng.random(), round(rng.random(), 1), 1.0]))
            results.append({"image_id": image["id"], "category_id": category, "bbox": box,
                            "score": score})
    categories = [{"id": c + 1} for c in range(n_cat)]
    return {"images": images, "categories": categories, "annotations": annotations}, results
