"""Reads a log directory that lockstep's TensorBoard callback wrote with
TensorBoard's own reader (EventAccumulator) and checks it against the JSON of
expected values that tensorboard_writer wrote: for each run (train/,
validation/) the same scalar and histogram tags, and for each tag the same
steps and values (scalars as float32; histograms' min, max, num, sum and
sum_squares, and buckets that add up to num). Then the multiplexer that
TensorBoard's UI loads runs with must file the same tags under its "scalars"
and "histograms" plugins. Any warning TensorBoard logs while loading (a bad
CRC, a truncated record) fails the check.

Usage: tensorboard_reader.py <log_dir> <expected.json>
Exits 77 (ctest: skipped) where `import tensorboard` fails.
"""
import json
import logging
import math
import os
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator, plugin_event_multiplexer
except ImportError as e:
    print(f"skipped: {sys.executable} cannot import tensorboard ({e}); pip install tensorboard")
    sys.exit(77)


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def same_float32(a, b):
    return a == b or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-30)


def check_run(log_dir, run, expected, errors):
    path = os.path.join(log_dir, run)
    files = [f for f in os.listdir(path) if "tfevents" in f]
    if len(files) != 1:
        errors.append(f"{run}: expected 1 event file, found {files}")
    acc = event_accumulator.EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    if acc.file_version != 2.0:
        errors.append(f"{run}: file_version {acc.file_version}, expected 2 (brain.Event:2)")
    tags = acc.Tags()
    if sorted(tags["scalars"]) != sorted(expected["scalars"]):
        errors.append(f"{run}: scalar tags {sorted(tags['scalars'])}, expected {sorted(expected['scalars'])}")
    if sorted(tags["histograms"]) != sorted(expected["histograms"]):
        errors.append(f"{run}: histogram tags {sorted(tags['histograms'])}, expected {sorted(expected['histograms'])}")
    checked = 0
    for tag, rows in expected["scalars"].items():
        if tag not in tags["scalars"]:
            continue
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        if [s for s, _ in got] != [int(r[0]) for r in rows]:
            errors.append(f"{run}/{tag}: steps {[s for s, _ in got]}, expected {[int(r[0]) for r in rows]}")
            continue
        for (step, value), row in zip(got, rows):
            checked += 1
            if not same_float32(value, row[1]):
                errors.append(f"{run}/{tag} step {step}: {value!r}, expected {row[1]!r}")
    for tag, rows in expected["histograms"].items():
        if tag not in tags["histograms"]:
            continue
        got = acc.Histograms(tag)
        if [e.step for e in got] != [int(r[0]) for r in rows]:
            errors.append(f"{run}/{tag}: steps {[e.step for e in got]}, expected {[int(r[0]) for r in rows]}")
            continue
        for e, row in zip(got, rows):
            checked += 1
            h = e.histogram_value
            values = [h.min, h.max, h.num, h.sum, h.sum_squares]
            if any(not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12) for a, b in zip(values, row[1:])):
                errors.append(f"{run}/{tag} step {e.step}: (min, max, num, sum, sum_squares) {values}, "
                              f"expected {row[1:]}")
            if sum(h.bucket) != h.num or len(h.bucket) != len(h.bucket_limit) or h.bucket_limit[-1] != h.max:
                errors.append(f"{run}/{tag} step {e.step}: buckets {list(h.bucket)} over limits "
                              f"{list(h.bucket_limit)} do not hold the {h.num} values up to {h.max}")
    return checked


def check_plugins(log_dir, expected, errors):
    """The UI's view: simple_value and histo values migrated to the scalars and histograms plugins."""
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(log_dir)
    multiplexer.Reload()
    if sorted(multiplexer.Runs()) != sorted(expected["runs"]):
        errors.append(f"runs {sorted(multiplexer.Runs())}, expected {sorted(expected['runs'])}")
    for plugin, kind in (("scalars", "scalars"), ("histograms", "histograms")):
        by_run = multiplexer.PluginRunToTagToContent(plugin)
        for run, want in expected["runs"].items():
            got = sorted(by_run.get(run, {}))
            if got != sorted(want[kind]):
                errors.append(f"{run}: the {plugin} plugin's tags {got}, expected {sorted(want[kind])}")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    log_dir, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        expected = json.load(f)
    warnings = Warnings()
    logging.getLogger("tensorboard").addHandler(warnings)
    errors = []
    checked = 0
    for run, want in expected["runs"].items():
        checked += check_run(log_dir, run, want, errors)
    check_plugins(log_dir, expected, errors)
    errors += [f"tensorboard warned: {m}" for m in warnings.messages]
    if checked == 0:
        errors.append("nothing was checked: the expected values are empty")
    for e in errors:
        print("MISMATCH", e)
    if errors:
        return 1
    import tensorboard
    print(f"tensorboard {tensorboard.__version__}'s EventAccumulator read {checked} scalar and histogram "
          f"events of {len(expected['runs'])} runs, all as expected; its plugins file them as scalars and histograms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
