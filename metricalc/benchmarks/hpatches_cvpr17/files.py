r"""Files of the HPatches CVPR'17 tasks: descriptor folders, splits, task files, pair generator.

The layout and task files are those of hpatches-benchmark (Balntas et al., CVPR 2017; its
``python/utils/hpatch.py`` and ``python/utils/tasks.py``):

- a descriptor folder ``DESCR_DIR/<sequence>/<image>.csv`` with the 16 images :data:`IMAGES17`
  (``ref``, ``e1..e5``, ``h1..h5``, ``t1..t5``), one comma-separated row per patch; row ``i`` of
  every image of a sequence is patch ``i`` (:func:`read_descriptors`);
- ``splits.json``: per split ``a, b, c, illum, view, full`` its ``test`` sequence list
  (:func:`read_splits`);
- retrieval queries and distractors ``retr_{queries,distractors}_split-X.csv`` (header ``s,idx``)
  and verification pairs ``verif_{pos,neg_intra,neg_inter}_split-X.csv`` (header
  ``s1,t1,idx1,s2,t2,idx2``, ``t = 0`` for ``ref`` and ``k`` for image ``k`` of a level).

The splits and retrieval files ship with metricalc (``cvpr17_data/``, BSD, see its ``COPYING``);
the verification files do not (about 600 MB): :func:`read_verification_pairs` reads them from a
``tasks/`` folder, and :func:`generate_verification_pairs` draws pairs by ``gen_verif``'s rule.

A descriptor or task folder of data metricalc generated holds a mark, :data:`DATASET_MARK`
(``{"dataset": "<name>"}``, :func:`write_dataset_mark`), that names the data; the folders of the
HPatches release hold none (:func:`data_name` of a descriptor and a task folder).

>>> sorted(read_splits())
['a', 'b', 'c', 'full', 'illum', 'view']
>>> len(read_splits()["full"]), read_retrieval_task("a").queries_seq[:2].tolist()
(116, ['v_birdwoman', 'v_strand'])
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write

__all__ = [
    "DATASET_MARK",
    "DATA_DIR",
    "IMAGES17",
    "LEVELS",
    "SPLITS17",
    "Descriptors",
    "PairSet",
    "RetrievalTask",
    "data_name",
    "dataset_attr",
    "draw_pair_indices",
    "generate_retrieval_task",
    "generate_verification_pairs",
    "read_dataset_mark",
    "read_descriptors",
    "read_retrieval_task",
    "read_splits",
    "read_verification_pairs",
    "write_dataset_mark",
    "write_retrieval_task",
]

DATA_DIR = Path(__file__).with_name("cvpr17_data")
"""The official splits and retrieval files shipped with metricalc."""

LEVELS: tuple[str, ...] = ("e", "h", "t")
"""The noise levels easy, hard, tough (images ``e*``, ``h*``, ``t*``)."""

IMAGES17: tuple[str, ...] = ("ref", *(f"{lv}{k}" for lv in LEVELS for k in range(1, 6)))
"""The 16 descriptor files of a sequence, in hpatches-benchmark's order."""

SPLITS17: tuple[str, ...] = ("a", "b", "c", "illum", "view", "full")
"""The splits of ``splits.json``."""

PAIR_FILES: tuple[str, ...] = ("pos", "neg_intra", "neg_inter")

DATASET_MARK = "metricalc_dataset.json"
"""The file that names the data of a descriptor or task folder metricalc generated."""


def image_index(level: str, t: np.ndarray) -> np.ndarray:
    """Index in :data:`IMAGES17` of image ``t`` (0 = ``ref``, k = ``<level>k``) of a level."""
    t = np.asarray(t, dtype=np.int64)
    return np.where(t == 0, 0, 1 + 5 * LEVELS.index(level) + t - 1)


@dataclass(frozen=True)
class Descriptors:
    """The descriptors of some sequences, all 16 images, in one float32 matrix.

    Row ``offsets[s] + image * counts[s] + i`` is patch ``i`` of image ``IMAGES17[image]`` of
    sequence ``s``.
    """

    matrix: np.ndarray
    offsets: Mapping[str, int]
    counts: Mapping[str, int]
    root: Path

    def rows(
        self, sequences: Sequence[str] | np.ndarray, image: np.ndarray | int, index: np.ndarray
    ) -> np.ndarray:
        """Matrix rows of patches ``index`` of images ``image`` of ``sequences`` (vectorized)."""
        first, count = self.locate(sequences, index)
        rows: np.ndarray = first + np.asarray(image, dtype=np.int64) * count
        return rows

    def locate(
        self, sequences: Sequence[str] | np.ndarray, index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per item, the matrix row of patch ``index`` of image 0 (``ref``) of its sequence and
        the sequence's patch count: the row of image ``k`` is ``row + k * count``
        (:meth:`rows`). The names are hashed once (``pandas.factorize``), not sorted."""
        import pandas as pd

        inverse, names = pd.factorize(np.asarray(sequences, dtype=object), sort=False)
        missing = [n for n in names if n not in self.offsets]
        if missing:
            raise InvalidInputError(f"{self.root}: no descriptors of sequence {missing[0]!r}")
        offset = np.array([self.offsets[n] for n in names], dtype=np.int64)[inverse]
        count = np.array([self.counts[n] for n in names], dtype=np.int64)[inverse]
        index = np.asarray(index, dtype=np.int64)
        bad = (index < 0) | (index >= count)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InvalidInputError(
                f"patch index {int(index[k])} of sequence {names[inverse[k]]!r}: expected "
                f"0..{int(count[k]) - 1} ({self.root} has {int(count[k])} patches there)"
            )
        return offset + index, count

    def image(self, sequence: str, image: str) -> np.ndarray:
        """The (N, D) descriptors of one image of a sequence."""
        n = self.counts[sequence]
        start = self.offsets[sequence] + IMAGES17.index(image) * n
        return self.matrix[start : start + n]


def _read_csv(path: Path) -> np.ndarray:
    if not path.is_file():
        raise InvalidInputError(
            f"{path}: missing descriptor file (expected one per image of {', '.join(IMAGES17)})"
        )
    try:
        values = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as error:
        reason = str(error).splitlines()[0]
        raise InvalidInputError(f"{path}: not a comma-separated matrix ({reason})") from None
    if values.shape[0] == 0 or values.shape[1] < 2:
        raise InvalidInputError(
            f"{path}: expected one row of at least 2 comma-separated values per patch, got shape "
            f"{values.shape}"
        )
    bad = ~np.isfinite(values).all(axis=1)
    if bad.any():
        raise InvalidInputError(
            f"{path}: row {int(np.flatnonzero(bad)[0]) + 1} holds a NaN or infinite value"
        )
    return values.astype(np.float32)


def read_descriptors(root: str | os.PathLike[str], sequences: Sequence[str]) -> Descriptors:
    """Read ``root/<s>/<image>.csv`` of every sequence ``s`` (all 16 images, float32).

    Raises
    ------
    InvalidInputError
        Naming the file: missing, not a matrix (ragged rows), a NaN or infinite row, a number of
        rows (patches) or columns (dimension) that differs from the sequence's ``ref.csv``.
    """
    root = Path(root)
    if not root.is_dir():
        raise InvalidInputError(f"descriptor folder {root} does not exist or is not a folder")
    blocks: list[np.ndarray] = []
    offsets: dict[str, int] = {}
    counts: dict[str, int] = {}
    start, dim = 0, 0
    for sequence in dict.fromkeys(sequences):
        ref = _read_csv(root / sequence / "ref.csv")
        n, dim = ref.shape[0], dim or ref.shape[1]
        if ref.shape[1] != dim:
            raise InvalidInputError(
                f"{root / sequence / 'ref.csv'}: {ref.shape[1]} values per "
                f"row, expected {dim} as in the other sequences"
            )
        blocks.append(ref)
        for image in IMAGES17[1:]:
            values = _read_csv(root / sequence / f"{image}.csv")
            if values.shape != ref.shape:
                raise InvalidInputError(
                    f"{root / sequence / image}.csv: {values.shape[0]} patches of dimension "
                    f"{values.shape[1]}, expected {n} of dimension {dim} as in ref.csv"
                )
            blocks.append(values)
        offsets[sequence], counts[sequence] = start, n
        start += 16 * n
    matrix = np.concatenate(blocks) if blocks else np.zeros((0, 0), np.float32)
    return Descriptors(matrix, offsets, counts, root)


def _task_path(tasks: str | os.PathLike[str] | None, name: str) -> Path:
    folder = DATA_DIR if tasks is None else Path(tasks)
    for candidate in (folder / name, folder / "splits" / name):
        if candidate.is_file():
            return candidate
    raise InvalidInputError(f"{folder}: no task file {name}")


def read_splits(tasks: str | os.PathLike[str] | None = None) -> dict[str, list[str]]:
    """The ``test`` list of every split of ``splits.json`` (``tasks/`` or ``tasks/splits/``;
    the shipped one when ``tasks`` is None), in file order (the generators draw from it)."""
    path = _task_path(tasks, "splits.json")
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): [str(s) for s in v["test"]] for k, v in content.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise InvalidInputError(
            f"{path}: expected {{split: {{'test': [...]}}}} ({error})"
        ) from None


def _is_int64(text: str) -> bool:
    try:
        return -(2**63) <= int(text) < 2**63
    except ValueError:
        return False


def _read_table(path: Path, columns: tuple[str, ...]) -> list[np.ndarray]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise InvalidInputError(f"{path}: not UTF-8 text (byte {error.start})") from None
    if not lines or tuple(lines[0].strip().split(",")) != columns:
        raise InvalidInputError(f"{path}: expected the header {','.join(columns)}")
    rows = [line.split(",") for line in lines[1:] if line.strip()]
    ragged = [k for k, row in enumerate(rows) if len(row) != len(columns)]
    if ragged:
        raise InvalidInputError(
            f"{path}: line {ragged[0] + 2} has {len(rows[ragged[0]])} "
            f"fields, expected {len(columns)}"
        )
    table = np.array(rows, dtype=object).reshape(len(rows), len(columns)).T
    out = []
    for name, column in zip(columns, table, strict=True):
        if name.startswith("s"):
            out.append(column.astype(str))
            continue
        try:
            out.append(column.astype(np.int64))
        except (ValueError, OverflowError):
            k = next(i for i, v in enumerate(column) if not _is_int64(v))
            raise InvalidInputError(
                f"{path}: data row {k + 1}: {name} = {column[k]!r}; expected a 64-bit integer"
            ) from None
    return out


@dataclass(frozen=True)
class RetrievalTask:
    """Retrieval queries and distractors (sequence, patch index of ``ref``), in file order."""

    queries_seq: np.ndarray
    queries_idx: np.ndarray
    distractors_seq: np.ndarray
    distractors_idx: np.ndarray


def read_retrieval_task(split: str, tasks: str | os.PathLike[str] | None = None) -> RetrievalTask:
    """``retr_queries_split-X.csv`` and ``retr_distractors_split-X.csv`` of a split."""
    q = _read_table(_task_path(tasks, f"retr_queries_split-{split}.csv"), ("s", "idx"))
    d = _read_table(_task_path(tasks, f"retr_distractors_split-{split}.csv"), ("s", "idx"))
    return RetrievalTask(q[0], q[1], d[0], d[1])


@dataclass(frozen=True)
class PairSet:
    """Verification pairs: per file of :data:`PAIR_FILES` the columns s1, t1, idx1, s2, t2, idx2."""

    pairs: Mapping[str, tuple[np.ndarray, ...]]
    source: str


def read_verification_pairs(split: str, tasks: str | os.PathLike[str]) -> PairSet:
    """``verif_{pos,neg_intra,neg_inter}_split-X.csv`` of a split from a ``tasks/`` folder."""
    columns = ("s1", "t1", "idx1", "s2", "t2", "idx2")
    pairs = {}
    for kind in PAIR_FILES:
        path = _task_path(tasks, f"verif_{kind}_split-{split}.csv")
        table = _read_table(path, columns)
        for t in (table[1], table[4]):
            if t.size and (t.min() < 0 or t.max() > 5):
                raise InvalidInputError(f"{path}: image ids t1, t2 must be 0..5")
        pairs[kind] = tuple(table)
    return PairSet(pairs, f"files of {Path(tasks)}")


def draw_pair_indices(
    rng: np.random.RandomState, counts: Sequence[int] | np.ndarray
) -> np.ndarray:
    """Two distinct patch indices per sequence count, drawn as ``gen_verif`` does
    (``choice(arange(k), 2, replace=False)`` per pair, in order).

    The legacy ``choice`` without replacement is ``permutation(k)[:2]``, a Fisher-Yates shuffle
    whose rejection sampling consumes a data-dependent number of draws, so the stream is
    sequential and a loop per pair is unavoidable; ``shuffle`` of a slice of one buffer makes the
    same draws at half the cost of ``choice`` (no argument checks, no new array per pair)."""
    sizes = np.asarray(counts, dtype=np.int64)
    out = np.empty((sizes.size, 2), dtype=np.int64)
    if not sizes.size:
        return out
    identity = np.arange(int(sizes.max()), dtype=np.int64)
    buffer = identity.copy()
    shuffle = rng.shuffle
    for row, k in enumerate(sizes.tolist()):
        view = buffer[:k]
        view[:] = identity[:k]
        shuffle(view)
        out[row] = view[:2]
    return out


def generate_verification_pairs(
    test: Sequence[str], counts: Mapping[str, int], *, n_pairs: int = 1_000_000
) -> PairSet:
    r"""Verification pairs by the rule of hpatches-benchmark's ``tasks.py`` ``gen_verif``.

    ``RandomState(42)``; ``s`` = ``n_pairs`` sequences drawn from the split's ``test`` list; per
    pair two distinct patch indices and two distinct image ids in ``0..4`` (so image 5 is never
    used); positives ``(s, t_a, i_a, s, t_b, i_a)``, intra negatives ``(s, t_a, i_a, s, t_b,
    i_b)``; then ``n_pairs`` more sequences ``s'`` and one index each (``randint``) for the
    inter negatives ``(s, t_a, i_a, s', t_b, i')``. ``counts`` are the patches per sequence.
    The draws are the reference's, one by one (:func:`draw_pair_indices`); the inter indices
    come from one ``randint`` over the array of bounds, which makes the same draws as the
    reference's loop of scalar calls.
    """
    missing = [s for s in test if s not in counts]
    if missing:
        raise InvalidInputError(f"no patch count for sequence {missing[0]!r}")
    rng = np.random.RandomState(42)
    names = np.asarray(test, dtype=object)
    size = np.array([counts[k] for k in test], dtype=np.int64)
    # choice(a, n) with replacement is a[randint(0, len(a), n)]: the codes keep the counts
    # a lookup instead of a dictionary access per pair
    code = rng.randint(0, len(test), n_pairs)
    s = names[code].astype(str)
    idx = draw_pair_indices(rng, size[code])
    types = draw_pair_indices(rng, np.full(n_pairs, 5, dtype=np.int64))
    code_inter = rng.randint(0, len(test), n_pairs)
    s_inter = names[code_inter].astype(str)
    idx_inter = rng.randint(0, size[code_inter]).astype(np.int64)
    t1, t2, i1 = types[:, 0], types[:, 1], idx[:, 0]
    pairs = {
        "pos": (s, t1, i1, s, t2, i1),
        "neg_intra": (s, t1, i1, s, t2, idx[:, 1]),
        "neg_inter": (s, t1, i1, s_inter, t2, idx_inter),
    }
    return PairSet(pairs, f"generated by gen_verif's rule (RandomState(42), {n_pairs} pairs)")


def _unique_rows(seqs: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each (sequence, index) row, in order."""
    keys = np.char.add(np.char.add(seqs.astype(str), ","), idx.astype(str))
    first = np.unique(keys, return_index=True)[1]
    return np.sort(first)


def generate_retrieval_task(
    test: Sequence[str],
    informative: Mapping[str, np.ndarray],
    *,
    n_queries: int = 10_000,
    n_distractors: int = 20_000,
) -> RetrievalTask:
    """Retrieval queries and distractors by the rule of ``tasks.py`` ``gen_retrieval``.

    ``RandomState(42)``; ``4 n_queries`` query and ``10 n_distractors`` distractor draws (a
    sequence of ``test``, then one ``randint`` patch index each, the queries' indices before the
    distractors' sequences, as the reference orders its draws); draws whose ``ref`` patch is not
    ``informative`` (the reference: pixel standard deviation > 10) are dropped, then duplicates
    (first kept); the first ``n_queries`` remain queries; distractors equal to a query are dropped
    and the first ``n_distractors`` remain. ``informative[s]`` is the boolean mask over the
    patches of sequence ``s``. (The official files hold 10,000 queries: ``N_queries = 1e4``,
    not the function's default ``0.5e4``.)
    """
    missing = [s for s in test if s not in informative]
    if missing:
        raise InvalidInputError(f"no patch mask for sequence {missing[0]!r}")
    rng = np.random.RandomState(42)
    pool = np.asarray(test, dtype=object)
    s_q = rng.choice(pool, 4 * n_queries).astype(str)
    i_q = np.array([rng.randint(informative[k].size) for k in s_q], dtype=np.int64)
    s_d = rng.choice(pool, 10 * n_distractors).astype(str)
    i_d = np.array([rng.randint(informative[k].size) for k in s_d], dtype=np.int64)
    keep_q = np.array([informative[s][i] for s, i in zip(s_q, i_q, strict=True)], dtype=bool)
    keep_d = np.array([informative[s][i] for s, i in zip(s_d, i_d, strict=True)], dtype=bool)
    s_q, i_q, s_d, i_d = s_q[keep_q], i_q[keep_q], s_d[keep_d], i_d[keep_d]
    first = _unique_rows(s_q, i_q)[:n_queries]
    s_q, i_q = s_q[first], i_q[first]
    first = _unique_rows(s_d, i_d)
    s_d, i_d = s_d[first], i_d[first]
    queries = set(zip(s_q.tolist(), i_q.tolist(), strict=True))
    fresh = np.array(
        [(s, i) not in queries for s, i in zip(s_d.tolist(), i_d.tolist(), strict=True)], dtype=bool
    )
    s_d, i_d = s_d[fresh][:n_distractors], i_d[fresh][:n_distractors]
    return RetrievalTask(s_q, i_q, s_d, i_d)


def write_retrieval_task(task: RetrievalTask, folder: str | os.PathLike[str], split: str) -> None:
    """Write ``retr_queries_split-X.csv`` and ``retr_distractors_split-X.csv`` (``s,idx``)."""
    for name, seqs, idx in (
        ("queries", task.queries_seq, task.queries_idx),
        ("distractors", task.distractors_seq, task.distractors_idx),
    ):
        text = "s,idx\n" + "".join(
            f"{s},{i}\n" for s, i in zip(seqs.tolist(), idx.tolist(), strict=True)
        )
        atomic_write(Path(folder) / f"retr_{name}_split-{split}.csv", text)


def write_dataset_mark(folder: str | os.PathLike[str], dataset: str) -> None:
    """Mark ``folder`` as holding the data ``dataset`` (:data:`DATASET_MARK`)."""
    atomic_write(Path(folder) / DATASET_MARK, json.dumps({"dataset": dataset}) + "\n")


def read_dataset_mark(folder: str | os.PathLike[str] | None) -> str:
    """The data a folder's :data:`DATASET_MARK` names; ``""`` without a mark (or a folder).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     before = read_dataset_mark(tmp)
    ...     write_dataset_mark(tmp, "synthetic-hpatches17 seed 0")
    ...     before, read_dataset_mark(tmp)
    ('', 'synthetic-hpatches17 seed 0')
    """
    if folder is None or not (Path(folder) / DATASET_MARK).is_file():
        return ""
    path = Path(folder) / DATASET_MARK
    try:
        name = json.loads(path.read_text(encoding="utf-8"))["dataset"]
    except (ValueError, KeyError, TypeError) as error:
        raise InvalidInputError(f'{path}: expected {{"dataset": "<name>"}} ({error})') from None
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{path}: expected a non-empty dataset name; got {name!r}")
    return name


def data_name(
    descr_dir: str | os.PathLike[str], task_dir: str | os.PathLike[str] | None = None
) -> str:
    """The data an evaluation of the descriptor folder ``descr_dir`` with the task folder
    ``task_dir`` runs on: the name their marks (:func:`read_dataset_mark`) give, ``""`` when
    neither is marked (the HPatches release). A descriptor folder of one generated set
    evaluated with the tasks of another is refused.
    """
    descriptors, tasks = read_dataset_mark(descr_dir), read_dataset_mark(task_dir)
    if descriptors and tasks and descriptors != tasks:
        raise InvalidInputError(
            f"the descriptor folder {descr_dir} holds {descriptors!r} but the task folder "
            f"{task_dir} holds {tasks!r} ({DATASET_MARK}): evaluate descriptors with the tasks "
            "of their own data"
        )
    return descriptors or tasks


def dataset_attr(data: str, description: str) -> str:
    """The ``dataset`` attr of a task cube: the task's ``description``, after ``"<data>: "``
    for generated data (``data``, the name :func:`data_name` gives; ``""``: the release).

    Examples
    --------
    >>> dataset_attr("", "hpatches-cvpr17 matching, split full")
    'hpatches-cvpr17 matching, split full'
    >>> dataset_attr("synthetic-hpatches17 (seed 0)", "x")
    'synthetic-hpatches17 (seed 0): x'
    """
    return f"{data}: {description}" if data else description
