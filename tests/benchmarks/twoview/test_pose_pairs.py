"""Pair lists: Glue Factory's 36 / 32 fields, SuperGlue's 38, one-line errors naming file and
line, and the round trip of write_pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metricalc.benchmarks.twoview.pairs import PosePair, read_pairs, write_pairs
from metricalc.errors import InvalidInputError

K0 = "1152.3 0 639.5 0 1152.3 479.5 0 0 1"
K1 = "1040.0 0 512.0 0 1041.5 384.0 0 0 1"
ROTATION = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])
R_TEXT = " ".join(str(v) for v in ROTATION.ravel())
T_TEXT = "0 -1 0 0.5 1 0 0 -0.25 0 0 1 2.0 0 0 0 1"


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "pairs.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_gluefactory_and_superglue_layouts(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "# a comment",
        f"0015/a.jpg 0015/b.jpg {K0} {K1} {T_TEXT}",
        "",
        f"c.jpg d.jpg {K0} {K1} {R_TEXT} 0.5 -0.25 2.0",
        f"e.jpg f.jpg 0 0 {K0} {K1} {T_TEXT}",
    )
    pairs = read_pairs(path)
    assert [p.name for p in pairs] == ["0015-a.jpg/0015-b.jpg", "c.jpg/d.jpg", "e.jpg/f.jpg"]
    for pair in pairs:
        assert pair.K0[0, 0] == 1152.3 and pair.K1[1, 2] == 384.0
        assert np.array_equal(pair.T_0to1[:3, :3], ROTATION)
        assert pair.T_0to1[:3, 3].tolist() == [0.5, -0.25, 2.0]


def test_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    T = np.eye(4)
    T[:3, :3] = np.linalg.qr(rng.normal(size=(3, 3)))[0] * np.array([1, 1, 1.0])
    if np.linalg.det(T[:3, :3]) < 0:
        T[:3, 0] *= -1
    T[:3, 3] = rng.normal(size=3)
    K = np.array([[523.123456789, 0, 320.1], [0, 524.5, 240.7], [0, 0, 1]])
    pairs = [PosePair("x.png", "y.png", K, K * [[1], [1], [1]], T)]
    back = read_pairs(write_pairs(tmp_path / "out.txt", pairs))
    assert np.array_equal(back[0].T_0to1, T) and np.array_equal(back[0].K0, K)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (f"a b {K0} {K1}", "pairs.txt:2: 20 fields; expected 36"),
        (f"a b {K0} {K1} {T_TEXT.replace('2.0', 'x')}", "pairs.txt:2: the pose has 'x'"),
        (f"a b {K0} {K1} {T_TEXT.replace('2.0', 'nan')}", "pairs.txt:2: the pose has a non-fin"),
        (f"a b {K0.replace('1152.3', '-5')} {K1} {T_TEXT}", "pairs.txt:2: K0 = .*fx, fy > 0"),
        (f"a b {K0} {K1} {T_TEXT.replace('0 0 0 1', '0 0 1 1')}", "pairs.txt:2: T_0to1's last"),
        (f"a b {K0} {K1} {T_TEXT.replace('0 -1 0 0.5', '0 -2 0 0.5', 1)}", "not a rotation"),
        (f"a b 1 0 {K0} {K1} {T_TEXT}", "pairs.txt:2: EXIF rotations \\[1, 0\\]"),
    ],
)
def test_bad_lines(tmp_path: Path, line: str, match: str) -> None:
    path = _write(tmp_path, f"ok.jpg ok2.jpg {K0} {K1} {T_TEXT}", line)
    with pytest.raises(InvalidInputError, match=match) as error:
        read_pairs(path)
    assert "\n" not in str(error.value)


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no pairs"):
        read_pairs(_write(tmp_path, "# nothing"))


def test_names_with_spaces_are_refused(tmp_path: Path) -> None:
    pair = PosePair("a b.png", "c.png", np.eye(3), np.eye(3), np.eye(4))
    with pytest.raises(InvalidInputError, match="without spaces"):
        write_pairs(tmp_path / "x.txt", [pair])
