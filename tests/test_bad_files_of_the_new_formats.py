"""Bad files of the pose, PhotoTour, FPR95 and HPatches CVPR'17 readers: one error naming the
file (and line or value), never a traceback."""

from __future__ import annotations

import numpy as np
import pytest

from metricalc.benchmarks.hpatches_cvpr17 import files as cvpr17_files
from metricalc.benchmarks.phototour.dataset import read_info
from metricalc.benchmarks.phototour.dataset import read_pairs as read_phototour_pairs
from metricalc.benchmarks.phototour.verification import read_descriptors, read_scores
from metricalc.benchmarks.twoview.pairs import read_pairs as read_pose_pairs
from metricalc.errors import InvalidInputError

POSE_LINE = "a.jpg b.jpg " + "1 0 0 0 1 0 0 0 1 " * 2 + "1 0 0 {tx} 0 1 0 0 0 0 1 0 0 0 0 1\n"


def test_pose_pair_lists(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_bytes(b"\xff\xfe" + POSE_LINE.format(tx=1).encode("utf-16-le"))
    with pytest.raises(InvalidInputError, match=r"pairs.txt: not UTF-8 text \(byte 0\)"):
        read_pose_pairs(path)
    path.write_text(POSE_LINE.format(tx=0))
    with pytest.raises(InvalidInputError, match=r"pairs.txt:1: T_0to1's translation is zero"):
        read_pose_pairs(path)
    path.write_text(POSE_LINE.format(tx=2))
    assert read_pose_pairs(path)[0].T_0to1[0, 3] == 2.0


@pytest.mark.parametrize("field", ["--2", "99999999999999999999", "1.5"])
def test_phototour_integers(tmp_path, field):
    pairs, info = tmp_path / "m50_1_1_0.txt", tmp_path / "info.txt"
    pairs.write_text(f"0 7 0 {field} 7 0\n")
    info.write_text(f"7 0\n{field} 0\n")
    with pytest.raises(InvalidInputError, match=r"m50_1_1_0.txt, line 1: expected six integers"):
        read_phototour_pairs(pairs)
    with pytest.raises(InvalidInputError, match=r"info.txt, line 2: expected two integers"):
        read_info(info)


def test_fpr95_inputs(tmp_path):
    archive = tmp_path / "d.npy"
    with archive.open("wb") as handle:
        np.savez(handle, x=np.ones((2, 2)))
    with pytest.raises(InvalidInputError, match=r"d.npy: is an .npz archive"):
        read_descriptors(archive)
    scores = tmp_path / "scores.csv"
    scores.write_text("distance,label\n0.5,1\n0.7,1\n")
    message = r"scores.csv: no negative \(non-matching\) pair: all 2 rows have label 1"
    with pytest.raises(InvalidInputError, match=message):
        read_scores(scores)


def test_cvpr17_task_tables(tmp_path):
    table = tmp_path / "retr_queries_split-a.csv"
    table.write_text("s,idx\nv_a,1\nv_a,99999999999999999999\n")
    with pytest.raises(InvalidInputError, match=r"data row 2: idx = '99999999999999999999'"):
        cvpr17_files.read_retrieval_task("a", tmp_path)
    table.write_bytes(b"s,idx\n\xff,1\n")
    with pytest.raises(InvalidInputError, match=r"not UTF-8 text \(byte 6\)"):
        cvpr17_files.read_retrieval_task("a", tmp_path)
