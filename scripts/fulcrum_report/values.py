"""Type-checked reads of report.json and numbers as people read them.

A report may come from an older build or a run that died half-way: any key may be missing,
null or of another type. These readers never raise; they return None, [] or a fallback.
"""

import json
import math

# ---------------------------------------------------------------------------------------------
# Reads.


def get(obj, key):
    """obj[key] when obj is a dict and the value is not null, else None."""
    if not isinstance(obj, dict):
        return None
    return obj.get(key)


def is_num(v):
    """True for a finite JSON number (bool is not a number here)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def num(obj, key, fallback=None):
    """obj[key] as a float when it is a finite number, else fallback."""
    v = get(obj, key)
    return float(v) if is_num(v) else fallback


def text(v):
    """A value as text: a string as it is, anything else as JSON."""
    if isinstance(v, str):
        return v
    try:
        return json.dumps(v, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        return str(v)


def string(obj, key, fallback=""):
    v = get(obj, key)
    return fallback if v is None else text(v)


def array(obj, key):
    v = get(obj, key)
    return v if isinstance(v, list) else []


def dict_at(obj, key):
    v = get(obj, key)
    return v if isinstance(v, dict) else None


def numbers(obj, key):
    """A numeric array; a non-number element becomes NaN so indexes stay aligned."""
    return [float(x) if is_num(x) else math.nan for x in array(obj, key)]


# ---------------------------------------------------------------------------------------------
# Formats. Bytes are decimal (1 KB = 1000 B), as network figures are.


def short(v, digits):
    """Up to `digits` decimals without trailing zeros: 1.500 -> "1.5", 2.0 -> "2"."""
    s = "%.*f" % (digits, v)
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


_BYTE_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")


def _scaled(v, trim):
    u = 0
    while abs(v) >= 1000 and u < len(_BYTE_UNITS) - 1:
        v /= 1000.0
        u += 1
    return "%s %s" % (short(v, 1) if trim or u == 0 else "%.1f" % v, _BYTE_UNITS[u])


def fmt_bytes(v):
    """Table bytes: 12300000 -> "12.3 MB", 300 -> "300 B"."""
    return _scaled(v, False)


def axis_bytes(v):
    """Tick bytes: 2e8 -> "200 MB"."""
    return _scaled(v, True)


def axis_bytes_per_sec(v):
    return axis_bytes(v) + "/s"


def fmt_count(v):
    """Counts and rates: 1234 -> "1234", 153234 -> "153.2k", 0.25 -> "0.25"."""
    if abs(v) >= 1e9:
        return short(v / 1e9, 2) + "G"
    if abs(v) >= 1e6:
        return short(v / 1e6, 2) + "M"
    if abs(v) >= 1e4:
        return short(v / 1e3, 1) + "k"
    return short(v, 3)


def fmt_pct(v):
    return "%.1f%%" % v


def axis_pct(v):
    return short(v, 0) + "%"


def fmt_ms(v):
    return short(v, 3) + " ms"


def fmt_seconds(v):
    return short(v, 2) + " s"


def axis_seconds(v):
    return short(v, 2) + " s"
