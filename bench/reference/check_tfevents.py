#!/usr/bin/env python3
"""Reads Fulcrum's TensorBoard event files with the real `tensorboard` package.

Two passes over a run directory (searched recursively for *tfevents* files):
  1. every record of every file through TensorBoard's own TFRecord reader, which checks
     both masked CRC-32Cs; unlike EventAccumulator, which logs a corrupt or truncated
     record at debug level and stops quietly, any DataLoss here is an error;
  2. EventMultiplexer/EventAccumulator, as the TensorBoard server loads them: per run,
     the scalar tags with their number of points, step range and last value.
Exit status 0 when every file reads cleanly and at least one scalar was found.
`--expect TAG=N` (repeatable) also requires N points of TAG summed over all runs.

Setup (never into the system python):
  /usr/bin/python3 -m venv build/tb-venv && build/tb-venv/bin/pip install tensorboard
  build/tb-venv/bin/python bench/reference/check_tfevents.py RUN_DIR [--expect loss=100]
"""

import argparse
import collections
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import event_multiplexer
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow


def event_files(run_dir):
    for root, _, names in os.walk(run_dir):
        for name in sorted(names):
            if "tfevents" in name:
                yield os.path.join(root, name)


def check_records(path):
    """Returns (records, file_version) or raises errors.DataLossError."""
    reader = pywrap_tensorflow.PyRecordReader_New(path, 0, "")
    records, version = 0, None
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return records, version
        event = event_pb2.Event.FromString(reader.record())
        if records == 0:
            version = event.file_version
        records += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--expect", action="append", default=[], metavar="TAG=N")
    args = parser.parse_args()

    files = list(event_files(args.run_dir))
    if not files:
        print(f"{args.run_dir}: no event files", file=sys.stderr)
        return 1
    ok = True
    for path in files:
        try:
            records, version = check_records(path)
            print(f"{path}: {records} records, file_version {version!r}")
            if version != "brain.Event:2":
                print(f"{path}: first record is not file_version brain.Event:2", file=sys.stderr)
                ok = False
        except errors.DataLossError as e:
            print(f"{path}: DataLoss: {e.message}", file=sys.stderr)
            ok = False

    multiplexer = event_multiplexer.EventMultiplexer(
        size_guidance={event_accumulator.SCALARS: 0})  # 0: keep every point
    multiplexer.AddRunsFromDirectory(args.run_dir)
    multiplexer.Reload()
    totals = collections.Counter()
    for run in sorted(multiplexer.Runs()):
        for tag in sorted(multiplexer.GetAccumulator(run).Tags()["scalars"]):
            points = multiplexer.Scalars(run, tag)
            totals[tag] += len(points)
            print(f"run {run!r} tag {tag!r}: {len(points)} points, steps "
                  f"{points[0].step}..{points[-1].step}, last value {points[-1].value:g}")
    if not totals:
        print(f"{args.run_dir}: TensorBoard found no scalars", file=sys.stderr)
        ok = False
    for expectation in args.expect:
        tag, _, count = expectation.rpartition("=")
        if totals[tag] != int(count):
            print(f"tag {tag!r}: {totals[tag]} points, expected {count}", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
