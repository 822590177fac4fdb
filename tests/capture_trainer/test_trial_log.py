"""The trial log contract: its one reader, its schema, its version check and its bounds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capture_trainer import trial_log
from capture_trainer.errors import TrialLogError

#: A trial written by the recorder as it was before the contract held the reader
#: (format_version 1, commit 92119df): ``build_trial(TrialRequest(scenario="paper-2019",
#: condition="dg", participant="novice", seed=3, time_limit_s=0.2, trial_id="format-v1",
#: end_on_capture=False), out).run()``. Every later reader must keep reading it.
V1_FILE = Path(__file__).parent / "data" / "trial-log-v1.parquet"


def write_log(path: Path, metadata: object, rows: int = 5) -> Path:
    """A small file with the given raw metadata (encoded here, not by the contract)."""
    table = pa.table({trial_log.TIME: np.arange(rows) * 1e-3})
    raw = metadata if isinstance(metadata, bytes) else json.dumps(metadata).encode()
    pq.write_table(table.replace_schema_metadata({trial_log.METADATA_KEY: raw}), path)
    return path


def test_a_file_written_with_format_1_keeps_loading() -> None:
    table, metadata = trial_log.read_trial_log(V1_FILE)
    assert metadata["format_version"] == 1 and metadata["complete"] is True
    assert table.num_rows == metadata["rows"] == 200
    assert tuple(table.column_names) == trial_log.required_columns(metadata["n_joints"], 1)
    assert set(trial_log.LogSchema.for_model(3).names) - set(table.column_names) == {
        "contact_force_x_n", "contact_force_y_n", "contact_force_z_n", "debris_w_x_rad_s", "debris_w_y_rad_s",
        "debris_w_z_rad_s", "contact", "captured"} | set(trial_log.POST_CAPTURE_COLUMNS) | set(
        trial_log.MASTER_COLUMNS)
    times = table[trial_log.TIME].to_numpy()
    np.testing.assert_allclose(np.diff(times), 1e-3)
    assert table.schema.field(trial_log.FLAG_ENGAGED).type == pa.bool_()
    assert set(metadata) >= (set(trial_log.METADATA_KEYS) - {"write_error"} - trial_log.METADATA_KEYS_ADDED_IN_V2
                             - trial_log.METADATA_KEYS_ADDED_IN_V3 - trial_log.METADATA_KEYS_ADDED_IN_V4)
    assert trial_log.read_metadata(V1_FILE) == metadata


def test_analysis_reads_the_format_1_file_through_the_contract() -> None:
    from analysis.metrics import compute_metrics
    from analysis.trial import read_trial

    trial = read_trial(V1_FILE)
    assert trial.complete and trial.n_joints == 3 and len(trial.frame) == 200
    assert compute_metrics(trial).n_fault_ticks == 0


def test_a_newer_format_is_refused_in_one_line(tmp_path: Path) -> None:
    path = write_log(tmp_path / "future.parquet", {"format_version": trial_log.FORMAT_VERSION + 1})
    with pytest.raises(TrialLogError) as caught:
        trial_log.read_trial_log(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert f"format_version {trial_log.FORMAT_VERSION + 1} is newer" in message
    with pytest.raises(TrialLogError, match="newer"):
        trial_log.read_metadata(path)


@pytest.mark.parametrize("version", ["1", 0, -3, 1.0, True, None])
def test_an_unknown_format_version_is_refused(tmp_path: Path, version: object) -> None:
    path = write_log(tmp_path / "odd.parquet", {"format_version": version})
    with pytest.raises(TrialLogError, match="unknown trial log format_version"):
        trial_log.read_trial_log(path)


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"trial_id": "x"}, "has no format_version"),
        (b"{not json", "not valid JSON"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_broken_metadata_is_refused(tmp_path: Path, metadata: object, expected: str) -> None:
    path = write_log(tmp_path / "broken.parquet", metadata)
    with pytest.raises(TrialLogError, match=expected):
        trial_log.read_trial_log(path)


def test_files_that_are_not_trial_logs_are_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.parquet"
    text.write_text("not parquet")
    with pytest.raises(TrialLogError, match="not a readable Parquet file"):
        trial_log.read_trial_log(text)
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"a": [1.0]}), plain)
    with pytest.raises(TrialLogError, match="not a capture-trainer trial log"):
        trial_log.read_trial_log(plain)
    with pytest.raises(TrialLogError, match="not a readable Parquet file"):
        trial_log.read_metadata(tmp_path / "missing.parquet")


def test_an_incomplete_file_reads_like_any_other(tmp_path: Path) -> None:
    path = write_log(tmp_path / "crashed.parquet", {"format_version": 1, "complete": False}, rows=3)
    table, metadata = trial_log.read_trial_log(path)
    assert table.num_rows == 3 and metadata["complete"] is False


def test_the_schema_builds_the_table_the_reader_reads(tmp_path: Path) -> None:
    schema = trial_log.LogSchema(("t_s", "a_m"), ("x", "y"))
    assert schema.flag_bit("y") == 2
    metadata = {"format_version": trial_log.FORMAT_VERSION, "note": np.float64(2.5), "q": np.arange(2)}
    table = schema.table(
        [pa.array([0.0, 1.0]), pa.array([3.0, 4.0]), pa.array([True, False]), pa.array([False, True])],
        trial_log.encode_metadata(metadata),
    )
    path = tmp_path / "t.parquet"
    trial_log.write_file(table, path)
    read, meta = trial_log.read_trial_log(path)
    assert read.schema.field("a_m").type == pa.float64() and read.schema.field("x").type == pa.bool_()
    assert read["y"].to_pylist() == [False, True]
    assert meta == {"format_version": trial_log.FORMAT_VERSION, "note": 2.5, "q": [0, 1]}


def test_a_long_trial_is_written_in_row_groups_of_bounded_size(tmp_path: Path) -> None:
    """A write encodes one row group at a time: 12,345 rows in chunks of 1000 (as the
    recorder keeps them) give groups of 5000, 5000 and 2345, and read back exactly."""
    schema = trial_log.LogSchema(("t_s", "a_m"), ("x",))
    k = np.arange(12345)
    arrays = (pa.array(k * 1e-3), pa.array(np.sin(k)), pa.array(k % 7 == 0))
    chunked = [pa.chunked_array([array.slice(i, 1000) for i in range(0, k.size, 1000)]) for array in arrays]
    path = tmp_path / "long.parquet"
    trial_log.write_file(schema.table(chunked, trial_log.encode_metadata({"format_version": 1})), path)
    layout = pq.ParquetFile(path).metadata
    assert [layout.row_group(i).num_rows for i in range(layout.num_row_groups)] == [5000, 5000, 2345]
    table = trial_log.read_trial_log(path).table
    np.testing.assert_array_equal(table["t_s"].to_numpy(), k * 1e-3)
    np.testing.assert_array_equal(table["a_m"].to_numpy(), np.sin(k))
    np.testing.assert_array_equal(table["x"].to_numpy(), k % 7 == 0)


@pytest.mark.parametrize(
    ("floats", "flags", "expected"),
    [(("t_s", "a"), ("a",), "unique"), (("t_s",), tuple(f"f{i}" for i in range(65)), "at most 64"), (("",), (), "non-empty")],
)
def test_bad_schemas_are_refused(floats: tuple[str, ...], flags: tuple[str, ...], expected: str) -> None:
    with pytest.raises(TrialLogError, match=expected):
        trial_log.LogSchema(floats, flags)


def test_a_failed_write_keeps_the_previous_file_and_removes_its_temporary(tmp_path: Path) -> None:
    schema = trial_log.LogSchema(("t_s",), ())
    path = tmp_path / "t.parquet"
    trial_log.write_file(schema.table([pa.array([0.0])], trial_log.encode_metadata({"format_version": 1})), path)
    tmp = tmp_path / ".t.parquet.tmp"
    tmp.symlink_to("/dev/full")  # every write into it fails: "No space left on device"
    bigger = schema.table([pa.array([0.0, 1.0])], trial_log.encode_metadata({"format_version": 1}))
    with pytest.raises(OSError) as caught:
        trial_log.write_file(bigger, path)
    assert trial_log.describe_write_failure(path, caught.value) == (
        f"writing {path} failed: [Errno 28] No space left on device"
    )
    assert not tmp.is_symlink() and not tmp.exists()
    assert trial_log.read_trial_log(path).table.num_rows == 1


class TestMetadataBounds:
    def test_texts_up_to_the_bound_are_accepted(self) -> None:
        text = "é" * (trial_log.MAX_TEXT_BYTES // 2)  # two bytes each: exactly the bound
        encoded = trial_log.encode_metadata({"scenario_config": {"description": text}})
        assert json.loads(encoded)["scenario_config"]["description"] == text

    @pytest.mark.parametrize(
        ("metadata", "field"),
        [
            ({"scenario_config": {"description": "x" * (50 << 20)}}, "scenario_config.description"),
            ({"scenario_config": {"description": "é" * (trial_log.MAX_TEXT_BYTES // 2 + 1)}}, "scenario_config.description"),
            ({"participant": {"id": "p" * 5000, "kind": "human"}}, "participant.id"),
            ({"notes": ["ok", "n" * 4097]}, "notes[1]"),
            ({"end_reason": "r" * 4097}, "end_reason"),
            ({"k" * 4097: 1}, "kkkk"),
        ],
    )
    def test_a_long_text_is_refused_naming_its_field(self, metadata: dict[str, object], field: str) -> None:
        with pytest.raises(TrialLogError) as caught:
            trial_log.encode_metadata(metadata)
        message = str(caught.value)
        assert f"field '{field}" in message and f"at most {trial_log.MAX_TEXT_BYTES} bytes" in message
        assert "\n" not in message and len(message) < 300

    def test_the_whole_metadata_is_bounded(self) -> None:
        metadata = {"trial_id": "t", "samples": list(range(20000)), "scenario_config": {"a": 1}}
        with pytest.raises(TrialLogError, match=r"at most 65536 are allowed \(largest fields: samples"):
            trial_log.encode_metadata(metadata)

    def test_nesting_is_bounded(self) -> None:
        deep: dict[str, object] = {}
        node = deep
        for _ in range(trial_log.MAX_METADATA_DEPTH + 2):
            node["a"] = {}
            node = node["a"]  # type: ignore[assignment]
        with pytest.raises(TrialLogError, match="nested deeper than"):
            trial_log.encode_metadata(deep)

    def test_values_json_cannot_hold_are_refused(self) -> None:
        with pytest.raises(TrialLogError, match="cannot be written as JSON"):
            trial_log.encode_metadata({"device": object()})

    def test_clip_text_keeps_whole_characters(self) -> None:
        assert trial_log.clip_text("short") == "short"
        clipped = trial_log.clip_text("é" * 5000)
        assert clipped.endswith("...") and len(clipped.encode()) <= trial_log.MAX_TEXT_BYTES
        trial_log.encode_metadata({"end_reason": clipped})
