"""What the studies' tables share: reading a run's JSON, the source a point ran from (its
record in OUT/points/, written by studies/lib/points.sh), and writing a CSV."""
import csv
import json
import os


def load_json(path):
    """The JSON file at path, or None when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def point_source(study_dir, name):
    """"commit/binaries" of point `name`'s record in STUDY_DIR/points/, "unknown" parts where
    there is none."""
    record = load_json(os.path.join(study_dir, "points", name + ".json")) or {}
    return "%s/%s" % (record.get("commit", "unknown"), record.get("binaries", "unknown"))


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
