#include "chief/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fulcrum::chief {
namespace {

using Json = nlohmann::json;
using Row = std::vector<std::string>;

// ---------------------------------------------------------------------------------------------
// Type-checked reads: report.json may come from an older build or a run that died half-way, so
// every key may be missing, null or of another type; nlohmann throws on a wrong-type get<>.

const Json* Get(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}
bool HasNum(const Json& j, const char* key) {
  const Json* v = Get(j, key);
  return v != nullptr && v->is_number();
}
double Num(const Json& j, const char* key, double fallback = 0.0) {
  return HasNum(j, key) ? Get(j, key)->get<double>() : fallback;
}
// A value as text; a non-string is shown as JSON. dump() would throw on invalid UTF-8.
std::string Text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}
std::string Str(const Json& j, const char* key, const std::string& fallback = "") {
  const Json* v = Get(j, key);
  return v == nullptr ? fallback : Text(*v);
}
// A numeric array; a non-number element becomes NaN so indexes stay aligned with unix_s.
std::vector<double> Numbers(const Json& j, const char* key) {
  std::vector<double> out;
  const Json* v = Get(j, key);
  if (v == nullptr || !v->is_array()) return out;
  for (const Json& x : *v) out.push_back(x.is_number() ? x.get<double>() : std::nan(""));
  return out;
}
const Json& Array(const Json& j, const char* key) {
  static const Json kEmpty = Json::array();
  const Json* v = Get(j, key);
  return v != nullptr && v->is_array() ? *v : kEmpty;
}
const Json* Object(const Json& j, const char* key) {
  const Json* v = Get(j, key);
  return v != nullptr && v->is_object() ? v : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Text for people: escaped, with units.

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}
// Up to `digits` decimals without trailing zeros: 1.500 -> "1.5", 2.0 -> "2".
std::string Short(double v, int digits) {
  std::string s = Fmt(v, digits);
  if (s.find('.') == std::string::npos) return s;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}
std::string Scaled(double v, double unit, const char* const* names, int n, bool trim) {
  int u = 0;
  while (std::abs(v) >= unit && u < n - 1) {
    v /= unit;
    ++u;
  }
  return absl::StrCat(trim || u == 0 ? Short(v, 1) : Fmt(v, 1), " ", names[u]);
}
constexpr const char* kByteUnits[] = {"B", "KB", "MB", "GB", "TB", "PB"};
std::string Bytes(double b) { return Scaled(b, 1000, kByteUnits, 6, false); }
std::string AxisBytes(double b) { return Scaled(b, 1000, kByteUnits, 6, true); }
std::string AxisBytesPerSec(double b) { return AxisBytes(b) + "/s"; }
// Counts and rates: 1234 -> "1234", 153234 -> "153.2k", 0.25 -> "0.25".
std::string Count(double v) {
  if (std::abs(v) >= 1e9) return Short(v / 1e9, 2) + "G";
  if (std::abs(v) >= 1e6) return Short(v / 1e6, 2) + "M";
  if (std::abs(v) >= 1e4) return Short(v / 1e3, 1) + "k";
  return Short(v, 3);
}
std::string Pct(double v) { return Fmt(v, 1) + "%"; }
std::string AxisPct(double v) { return Short(v, 0) + "%"; }
std::string Ms(double v) { return Short(v, 3) + " ms"; }
std::string Seconds(double v) { return Short(v, 2) + " s"; }

// ---------------------------------------------------------------------------------------------
// SVG charts. Each SVG carries its own style and background so a chart saved from the page
// looks the same on its own.

// Tableau 10: distinguishable, and still readable for the common color-vision deficiencies.
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
const char* Color(size_t i) { return kColors[i % std::size(kColors)]; }

constexpr char kSvgStyle[] =
    "<style>text{font:11px sans-serif;fill:#222}.t{font-size:13px;text-anchor:middle}"
    ".m{text-anchor:middle}.e{text-anchor:end}.n{fill:#777}.g{stroke:#eee}.a{stroke:#888}"
    "</style>";
constexpr double kWidth = 560;

std::string SvgOpen(double h, const std::string& title) {
  return absl::StrCat("<figure><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", kWidth,
                      " ", h, "\" width=\"", kWidth, "\" height=\"", h, "\" role=\"img\">",
                      kSvgStyle, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/><title>",
                      Escape(title), "</title><text x=\"", kWidth / 2, "\" y=\"18\" class=\"t\">",
                      Escape(title), "</text>");
}
std::string SvgText(double x, double y, const std::string& cls, const std::string& text) {
  return absl::StrCat("<text x=\"", Short(x, 1), "\" y=\"", Short(y, 1), "\" class=\"", cls, "\">",
                      Escape(text), "</text>");
}
std::string SvgLine(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return absl::StrCat("<line x1=\"", Short(x1, 1), "\" y1=\"", Short(y1, 1), "\" x2=\"",
                      Short(x2, 1), "\" y2=\"", Short(y2, 1), "\" ", attrs, "/>");
}

struct LegendItem {
  std::string name, color;
  bool dashed = false, box = false;  // box: a filled square (bars) instead of a line
};

// Legend items flowed left to right in rows from y; returns the SVG and sets *height. It sits
// outside the plot so it never hides data.
std::string Legend(const std::vector<LegendItem>& items, double y, double* height) {
  std::string svg;
  double x = 12, row = 0;
  for (const LegendItem& it : items) {
    const double w = 26 + 6.2 * static_cast<double>(it.name.size());
    if (x + w > kWidth - 8 && x > 12) {  // next row
      x = 12;
      row += 16;
    }
    const double cy = y + row;
    if (it.box) {
      absl::StrAppend(&svg, "<rect x=\"", Short(x, 1), "\" y=\"", Short(cy - 8, 1),
                      "\" width=\"10\" height=\"10\" fill=\"", it.color, "\"/>");
    } else {
      svg += SvgLine(x, cy - 4, x + 16, cy - 4,
                     absl::StrCat("stroke=\"", it.color, "\" stroke-width=\"2.5\"",
                                  it.dashed ? " stroke-dasharray=\"4 2\"" : ""));
    }
    svg += SvgText(x + (it.box ? 14 : 20), cy, "", it.name);
    x += w;
  }
  *height = items.empty() ? 0 : row + 16;
  return svg;
}

// "Nice" ticks (1, 2, 5 × 10^k) that cover [lo, hi]: the axis runs from the first to the last.
std::vector<double> Ticks(double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (!(hi > lo)) hi = lo + std::max(1.0, std::abs(lo) * 1e-3);
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  }
  const double first = std::floor(lo / step) * step;
  const double n = std::ceil((hi - first) / step - 1e-9);
  // Values so large that the step vanishes in their precision get just their two ends.
  if (!std::isfinite(step) || !std::isfinite(n) || n < 1 || n > 20 || first + step == first) {
    return {lo, hi};
  }
  std::vector<double> t;
  for (int i = 0; i <= static_cast<int>(n); ++i) t.push_back(first + step * i);
  return t;
}

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::string color;  // empty: by position
  bool dashed = false;
};

// Maps data to the plot area.
struct Plot {
  static constexpr double kLeft = 72, kRight = kWidth - 16, kTop = 40, kBottom = 260;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  // In halves: the span of two finite doubles (-1e308 .. 1e308) may overflow, its half not.
  double X(double x) const {
    return kLeft + (x / 2 - x0 / 2) / (x1 / 2 - x0 / 2) * (kRight - kLeft);
  }
  double Y(double y) const {
    return kBottom - (y / 2 - y0 / 2) / (y1 / 2 - y0 / 2) * (kBottom - kTop);
  }
};

bool Finite(const Series& s, size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }
size_t Points(const Series& s) { return std::min(s.x.size(), s.y.size()); }

// Both axes start at 0 (time since the first sample, a step count, a rate) unless data is
// negative; the ticks round the ends outwards. Returns false when there is nothing to draw.
bool Fit(const std::vector<Series>& series, Plot* p, std::vector<double>* xt,
         std::vector<double>* yt) {
  double x0 = 0, x1 = -std::numeric_limits<double>::infinity(), y0 = 0, y1 = x1;
  for (const Series& s : series) {
    for (size_t i = 0; i < Points(s); ++i) {
      if (!Finite(s, i)) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
    }
  }
  if (!std::isfinite(x1)) return false;
  *xt = Ticks(x0, x1);
  *yt = Ticks(y0, y1);
  p->x0 = xt->front(), p->x1 = xt->back(), p->y0 = yt->front(), p->y1 = yt->back();
  return p->x1 > p->x0 && p->y1 > p->y0;
}

std::string Axes(const Plot& p, const std::vector<double>& xt, const std::vector<double>& yt,
                 const std::string& x_label, const std::string& y_label,
                 std::string (*y_format)(double)) {
  std::string svg;
  for (double v : yt) {
    svg += SvgLine(Plot::kLeft, p.Y(v), Plot::kRight, p.Y(v), "class=\"g\"");
    svg += SvgText(Plot::kLeft - 5, p.Y(v) + 4, "e", y_format(v));
  }
  for (double v : xt) {
    svg += SvgLine(p.X(v), Plot::kBottom, p.X(v), Plot::kBottom + 4, "class=\"a\"");
    svg += SvgText(p.X(v), Plot::kBottom + 16, "m", Count(v));
  }
  svg += SvgLine(Plot::kLeft, Plot::kTop, Plot::kLeft, Plot::kBottom, "class=\"a\"");
  svg += SvgLine(Plot::kLeft, Plot::kBottom, Plot::kRight, Plot::kBottom, "class=\"a\"");
  svg += SvgText((Plot::kLeft + Plot::kRight) / 2, Plot::kBottom + 32, "m", x_label);
  absl::StrAppend(&svg, "<text transform=\"translate(13,", (Plot::kTop + Plot::kBottom) / 2,
                  ") rotate(-90)\" class=\"m\">", Escape(y_label), "</text>");
  return svg;
}

// One polyline per series; sparse series (evaluations) also get a dot per point, and a series
// of one point would otherwise not show at all.
std::string Lines(const Plot& p, const Series& s, const std::string& color) {
  std::string pts, dots;
  size_t n = 0;
  for (size_t i = 0; i < Points(s); ++i) n += Finite(s, i) ? 1 : 0;
  for (size_t i = 0; i < Points(s); ++i) {
    if (!Finite(s, i)) continue;
    absl::StrAppend(&pts, Short(p.X(s.x[i]), 1), ",", Short(p.Y(s.y[i]), 1), " ");
    if (n <= 30) {
      absl::StrAppend(&dots, "<circle cx=\"", Short(p.X(s.x[i]), 1), "\" cy=\"",
                      Short(p.Y(s.y[i]), 1), "\" r=\"2.5\" fill=\"", color, "\"/>");
    }
  }
  return absl::StrCat("<polyline fill=\"none\" stroke=\"", color,
                      "\" stroke-width=\"1.6\" stroke-linejoin=\"round\"",
                      s.dashed ? " stroke-dasharray=\"5 3\"" : "", " points=\"", pts, "\"><title>",
                      Escape(s.name), "</title></polyline>", dots);
}

// A line chart: axes with tick labels in the y unit, one line per named series, a legend
// below, and an optional note (what was left out) under the title.
std::string LineChart(const std::string& title, const std::string& x_label,
                      const std::string& y_label, const std::vector<Series>& series,
                      std::string (*y_format)(double) = Count, const std::string& note = "") {
  Plot p;
  std::vector<double> xt, yt;
  if (!Fit(series, &p, &xt, &yt)) {
    return SvgOpen(80, title) + SvgText(kWidth / 2, 50, "m n", "no data") + "</svg></figure>";
  }
  std::vector<LegendItem> items;
  std::string body = Axes(p, xt, yt, x_label, y_label, y_format);
  for (size_t k = 0; k < series.size(); ++k) {
    const std::string color = series[k].color.empty() ? Color(k) : series[k].color;
    body += Lines(p, series[k], color);
    items.push_back({series[k].name, color, series[k].dashed, false});
  }
  double legend_h = 0;
  body += Legend(items, Plot::kBottom + 54, &legend_h);
  if (!note.empty()) body += SvgText(kWidth / 2, 33, "m n", note);
  return SvgOpen(Plot::kBottom + 46 + legend_h, title) + body + "</svg></figure>";
}

struct Bar {
  std::string label;
  std::vector<double> parts;  // stacked left to right
  std::string note;           // shown after the bar; empty: the total
};

double Clean(double v) { return std::isfinite(v) && v > 0 ? v : 0.0; }

std::string BarRow(const Bar& bar, const std::vector<std::string>& part_names, double y,
                   double scale, std::string (*format)(double)) {
  constexpr double kLeft = 160;
  std::string svg = SvgText(kLeft - 6, y + 12, "e", bar.label);
  double x = kLeft, total = 0;
  for (size_t i = 0; i < bar.parts.size(); ++i) {
    const double v = Clean(bar.parts[i]);
    const std::string part = i < part_names.size() ? part_names[i] : "";
    absl::StrAppend(&svg, "<rect x=\"", Short(x, 1), "\" y=\"", y, "\" width=\"",
                    Short(v * scale, 1), "\" height=\"15\" fill=\"", Color(i), "\"><title>",
                    Escape(absl::StrCat(bar.label, " ", part, ": ", format(v))), "</title></rect>");
    x += v * scale, total += v;
  }
  return svg + SvgText(x + 5, y + 12, "", bar.note.empty() ? format(total) : bar.note);
}

// Horizontal stacked bars, one row per bar, a legend for the parts on top.
std::string BarChart(const std::string& title, const std::vector<std::string>& part_names,
                     const std::vector<Bar>& bars, std::string (*format)(double)) {
  double max_total = 0, max_note = 0;
  for (const Bar& b : bars) {
    double t = 0;
    for (double v : b.parts) t += Clean(v);
    max_total = std::max(max_total, t);
    max_note = std::max(max_note, static_cast<double>(b.note.size()));
  }
  if (bars.empty() || max_total <= 0) {
    return SvgOpen(80, title) + SvgText(kWidth / 2, 50, "m n", "no data") + "</svg></figure>";
  }
  std::vector<LegendItem> items;
  for (size_t i = 0; i < part_names.size(); ++i)
    items.push_back({part_names[i], Color(i), false, true});
  double legend_h = 0;
  std::string body = Legend(items, 38, &legend_h);
  // The longest bar leaves room for the longest note after it.
  const double room = std::max(120.0, kWidth - 160 - 16 - 6.2 * std::max(max_note, 10.0));
  const double top = 32 + legend_h, scale = room / max_total;
  for (size_t i = 0; i < bars.size(); ++i) {
    body += BarRow(bars[i], part_names, top + 22.0 * static_cast<double>(i), scale, format);
  }
  return SvgOpen(top + 22.0 * static_cast<double>(bars.size()) + 8, title) + body +
         "</svg></figure>";
}

// ---------------------------------------------------------------------------------------------
// The report's task summaries, and the charts drawn from them.

struct Task {
  std::string name;  // "worker-1"
  const Json* summary;
};

std::string TaskName(const Json& s, const std::string& job) {
  const double index = Num(s, "task_index");
  // A cast of an out-of-range double is undefined; such an index is shown as it is.
  if (!(std::abs(index) < 1e9)) return absl::StrCat(Str(s, "job", job), "-", Short(index, 0));
  return absl::StrCat(Str(s, "job", job), "-", static_cast<long>(index));
}

// Every task summary of the report, chief first, then ps and workers in report order.
std::vector<Task> Tasks(const Json& r) {
  std::vector<Task> out;
  if (const Json* c = Object(r, "chief"); c != nullptr) out.push_back({TaskName(*c, "chief"), c});
  for (const auto& [key, job] : {std::pair{"ps", "ps"}, std::pair{"workers", "worker"}}) {
    for (const Json& s : Array(r, key)) {
      if (s.is_object()) out.push_back({TaskName(s, job), &s});
    }
  }
  return out;
}

const Json* SeriesPart(const Json& summary, const char* part) {
  const Json* series = Object(summary, "series");
  return series == nullptr ? nullptr : Object(*series, part);
}

// The earliest unix time of any series: time zero of every time chart.
double TimeZero(const std::vector<Task>& tasks) {
  double t0 = std::numeric_limits<double>::infinity();
  for (const Task& t : tasks) {
    for (const char* part : {"samples", "steps"}) {
      const Json* p = SeriesPart(*t.summary, part);
      if (p == nullptr) continue;
      for (double u : Numbers(*p, "unix_s")) t0 = std::isfinite(u) ? std::min(t0, u) : t0;
    }
  }
  return std::isfinite(t0) ? t0 : 0.0;
}

// One series per task that has `part`.`key`, against seconds since t0. A task keeps its color in
// every chart: its position among all tasks.
std::vector<Series> TimeSeries(const std::vector<Task>& tasks, double t0, const char* part,
                               const char* key) {
  std::vector<Series> out;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Json* p = SeriesPart(*tasks[i].summary, part);
    if (p == nullptr || Get(*p, key) == nullptr) continue;
    Series s{tasks[i].name, Numbers(*p, "unix_s"), Numbers(*p, key), Color(i)};
    for (double& x : s.x) x -= t0;
    out.push_back(std::move(s));
  }
  return out;
}

std::string EvalChart(const Json& r) {
  Series acc{"test accuracy", {}, {}, ""}, loss{"test loss", {}, {}, "", true};
  for (const Json& e : Array(r, "evals")) {
    const double step = Num(e, "global_step", std::nan(""));
    acc.x.push_back(step), acc.y.push_back(Num(e, "test_accuracy", std::nan("")));
    loss.x.push_back(step), loss.y.push_back(Num(e, "test_loss", std::nan("")));
  }
  return LineChart("Chief's evaluations on the test set", "global step", "accuracy / loss",
                   {acc, loss});
}

// The task whose samples speak for each host: all tasks of a host read the same interface
// counters. The hosts table names it (interfaces_from), else its first task with samples.
std::vector<std::pair<std::string, const Task*>> HostSamplers(const Json& r,
                                                              const std::vector<Task>& tasks) {
  auto has_net = [](const Task& t) {
    const Json* s = SeriesPart(*t.summary, "samples");
    return s != nullptr && Object(*s, "network") != nullptr;
  };
  std::vector<std::pair<std::string, const Task*>> out;
  std::set<std::string> seen;
  for (const Json& h : Array(r, "hosts")) {
    std::vector<std::string> names = {Str(h, "interfaces_from")};
    for (const Json& n : Array(h, "tasks")) names.push_back(Text(n));
    for (const std::string& name : names) {
      auto it = std::find_if(tasks.begin(), tasks.end(),
                             [&](const Task& t) { return t.name == name && has_net(t); });
      if (it == tasks.end() || !seen.insert(Str(h, "host", "?")).second) continue;
      out.emplace_back(Str(h, "host", "?"), &*it);
    }
  }
  // Hosts the table lacks (an older report) come from the summaries' own host key.
  for (const Task& t : tasks) {
    const std::string host = Str(*t.summary, "host", "unknown");
    if (has_net(t) && seen.insert(host).second) out.emplace_back(host, &t);
  }
  return out;
}

bool AllZero(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return !(std::abs(x) > 0); });
}

// rx and tx of every interface of one host: a color per interface, tx dashed. Interfaces that
// moved nothing are named in a note instead of drawn, so they do not hide the axis.
std::string NetworkChart(const std::string& host, const Task& task, double t0) {
  const Json& samples = *SeriesPart(*task.summary, "samples");
  std::vector<double> t = Numbers(samples, "unix_s");
  for (double& x : t) x -= t0;
  std::vector<Series> lines;
  std::vector<std::string> idle;
  for (const auto& [name, v] : Object(samples, "network")->items()) {
    const std::vector<double> rx = Numbers(v, "rx_bytes_per_sec"),
                              tx = Numbers(v, "tx_bytes_per_sec");
    if (AllZero(rx) && AllZero(tx)) {
      idle.push_back(name);
      continue;
    }
    const std::string label = absl::StrCat(name, name == "lo" ? " (loopback)" : " (external)");
    const std::string color = Color(lines.size() / 2);
    lines.push_back({label + " rx", t, rx, color});
    lines.push_back({label + " tx", t, tx, color, true});
  }
  return LineChart(absl::StrCat("Network of host ", host, " (as seen by ", task.name, ")"),
                   "seconds since start", "bytes/s per interface", lines, AxisBytesPerSec,
                   idle.empty() ? "" : "idle: " + absl::StrJoin(idle, ", "));
}

std::string PeerChart(const std::vector<Task>& tasks) {
  std::vector<Bar> bars;
  for (const Task& t : tasks) {
    for (const Json& p : Array(*t.summary, "peer_traffic")) {
      const double sent = Num(p, "bytes_sent"), received = Num(p, "bytes_received");
      bars.push_back({absl::StrCat(t.name, " \u2192 ", Str(p, "peer", "?")),
                      {sent, received},
                      absl::StrCat(Bytes(sent), " / ", Bytes(received))});
    }
  }
  return BarChart("Application bytes each task sent / received per peer", {"sent", "received"},
                  bars, Bytes);
}

std::string PhaseChart(const std::vector<Task>& tasks) {
  static const std::vector<std::string> kPhases = {"data",     "pull", "forward",
                                                   "backward", "push", "sync_wait"};
  std::vector<Bar> bars;
  for (const Task& t : tasks) {
    const Json* m = Object(*t.summary, "step_phase_mean_ms");
    if (m == nullptr) continue;
    Bar b{t.name, {}, ""};
    double total = 0;
    for (const std::string& phase : kPhases) {
      b.parts.push_back(Num(*m, phase.c_str()));
      total += Clean(b.parts.back());
    }
    b.note = Ms(total);
    if (HasNum(*t.summary, "step_time_p50_ms")) {
      absl::StrAppend(&b.note, " (p50 ", Ms(Num(*t.summary, "step_time_p50_ms")), ", p99 ",
                      Ms(Num(*t.summary, "step_time_p99_ms")), ")");
    }
    bars.push_back(std::move(b));
  }
  return BarChart("Mean step time of each worker by phase", kPhases, bars, Ms);
}

std::string Charts(const Json& r) {
  const std::vector<Task> tasks = Tasks(r);
  const double t0 = TimeZero(tasks);
  std::string html = "<h2>Training</h2><div class=\"grid\">";
  html += LineChart("Examples/sec per worker", "seconds since start", "examples/sec",
                    TimeSeries(tasks, t0, "steps", "examples_per_sec"));
  html += LineChart("Training loss per worker", "seconds since start", "loss",
                    TimeSeries(tasks, t0, "steps", "loss"));
  html += EvalChart(r);
  html += PhaseChart(tasks);
  html += "</div><h2>CPU and memory</h2><div class=\"grid\">";
  html += LineChart("Process CPU per task (100% = one core)", "seconds since start", "CPU",
                    TimeSeries(tasks, t0, "samples", "cpu_percent"), AxisPct);
  html += LineChart("Resident memory (RSS) per task", "seconds since start", "RSS",
                    TimeSeries(tasks, t0, "samples", "rss_bytes"), AxisBytes);
  html += "</div><h2>Network</h2><div class=\"grid\">";
  for (const auto& [host, task] : HostSamplers(r, tasks)) html += NetworkChart(host, *task, t0);
  html += PeerChart(tasks);
  return html + "</div>";
}

// ---------------------------------------------------------------------------------------------
// Tables.

std::string Table(const Row& head, const std::vector<Row>& rows) {
  std::string html = "<table><tr>";
  for (const std::string& h : head) absl::StrAppend(&html, "<th>", Escape(h), "</th>");
  html += "</tr>";
  for (const Row& row : rows) {
    html += "<tr>";
    for (const std::string& c : row) absl::StrAppend(&html, "<td>", Escape(c), "</td>");
    html += "</tr>";
  }
  return html + "</table>";
}

// A run value with its unit, chosen by the key's name.
std::string RunValue(const std::string& key, const Json& v) {
  if (!v.is_number()) return Text(v);
  const double d = v.get<double>();
  if (key.size() > 8 && key.compare(key.size() - 8, 8, "_seconds") == 0) return Seconds(d);
  if (key.find("examples_per_sec") != std::string::npos) return Count(d);
  if (v.is_number_integer() || v.is_number_unsigned()) return Text(v);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", d);
  return buf;
}

std::string RunTable(const Json& r) {
  static const char* const kKeys[] = {"run_id",           "model",
                                      "dataset",          "mode",
                                      "optimizer",        "learning_rate",
                                      "batch_size",       "num_ps",
                                      "num_workers",      "placement",
                                      "train_steps",      "global_step",
                                      "stop_reason",      "final_test_accuracy",
                                      "final_test_loss",  "time_to_target_accuracy_seconds",
                                      "train_seconds",    "wall_seconds",
                                      "examples_per_sec", "workers_examples_per_sec"};
  std::vector<Row> rows;
  std::set<std::string> shown;
  for (const char* key : kKeys) {
    shown.insert(key);
    if (const Json* v = Get(r, key); v != nullptr) {
      rows.push_back({key, RunValue(key, *v)});
    } else if (r.is_object() && r.contains(key)) {
      rows.push_back({key, "n/a"});  // null: e.g. the target accuracy was never reached
    }
  }
  // Any other plain value the chief adds (seed, pushes_dropped, ...) follows.
  if (r.is_object()) {
    for (const auto& [key, v] : r.items()) {
      if (!shown.count(key) && !v.is_null() && !v.is_structured())
        rows.push_back({key, RunValue(key, v)});
    }
  }
  return "<h2>Run</h2>" + Table({"key", "value"}, rows);
}

std::string TaskTable(const Json& r) {
  std::vector<Row> rows;
  for (const Json& t : Array(r, "tasks")) {
    rows.push_back({Str(t, "task"), Str(t, "host"), Seconds(Num(t, "cpu_seconds")),
                    Pct(Num(t, "cpu_percent_mean")), Pct(Num(t, "cpu_percent_max")),
                    Bytes(Num(t, "peak_rss_bytes")), Bytes(Num(t, "loopback_bytes_sent")),
                    Bytes(Num(t, "loopback_bytes_received")), Bytes(Num(t, "external_bytes_sent")),
                    Bytes(Num(t, "external_bytes_received")), Bytes(Num(t, "app_bytes_sent")),
                    Bytes(Num(t, "app_bytes_received")), Count(Num(t, "rpcs")),
                    HasNum(t, "examples_per_sec") ? Count(Num(t, "examples_per_sec")) : ""});
  }
  return "<h2>Tasks</h2>" + Table({"task", "host", "CPU time", "CPU mean", "CPU max", "peak RSS",
                                   "lo sent", "lo received", "external sent", "external received",
                                   "app sent", "app received", "RPCs", "examples/sec"},
                                  rows);
}

// "eth0 1.2 MB in / 3.4 MB out" for each interface that moved anything.
std::string Interfaces(const Json& host) {
  std::vector<std::string> parts;
  for (const Json& i : Array(host, "interfaces")) {
    const double rx = Num(i, "rx_bytes"), tx = Num(i, "tx_bytes");
    if (rx > 0 || tx > 0) {
      parts.push_back(
          absl::StrCat(Str(i, "name", "?"), " ", Bytes(rx), " in / ", Bytes(tx), " out"));
    }
  }
  return absl::StrJoin(parts, "; ");
}

// The processor a host's tasks reported (System Information of the first that has one).
std::string Processor(const std::vector<Task>& tasks, const std::string& host) {
  for (const Task& t : tasks) {
    const Json* info = Object(*t.summary, "System Information");
    if (info != nullptr && Str(*t.summary, "host") == host) {
      return absl::StrCat(Str(*info, "Processor"), " (", Str(*info, "Machine"), ", ",
                          Str(*info, "System"), " ", Str(*info, "Release"), ")");
    }
  }
  return "";
}

std::string HostTable(const Json& r) {
  const std::vector<Task> tasks = Tasks(r);
  std::vector<Row> rows;
  for (const Json& h : Array(r, "hosts")) {
    std::vector<std::string> names;
    for (const Json& t : Array(h, "tasks")) names.push_back(Text(t));
    rows.push_back({Str(h, "host"), absl::StrJoin(names, ", "), Pct(Num(h, "cpu_percent_mean")),
                    Bytes(Num(h, "peak_rss_bytes")), Bytes(Num(h, "loopback_bytes_sent")),
                    Bytes(Num(h, "external_bytes_sent")), Bytes(Num(h, "external_bytes_received")),
                    Interfaces(h), Processor(tasks, Str(h, "host"))});
  }
  return "<h2>Hosts</h2>" + Table({"host", "tasks", "CPU (sum)", "peak RSS (sum)", "loopback sent",
                                   "external sent", "external received", "interfaces", "processor"},
                                  rows);
}

std::string ClusterTable(const Json& r) {
  const Json* c = Object(r, "cluster");
  if (c == nullptr) return "";
  return "<h2>Cluster</h2>" +
         Table({"tasks", "hosts", "CPU time", "CPU (sum of means)", "peak RSS (sum)",
                "network sent", "network received", "external sent", "external received",
                "app sent", "app received", "examples/sec (workers)"},
               {{Count(Num(*c, "tasks")), Count(Num(*c, "hosts")), Seconds(Num(*c, "cpu_seconds")),
                 Pct(Num(*c, "cpu_percent_mean")), Bytes(Num(*c, "peak_rss_bytes")),
                 Bytes(Num(*c, "net_bytes_sent")), Bytes(Num(*c, "net_bytes_received")),
                 Bytes(Num(*c, "external_bytes_sent")), Bytes(Num(*c, "external_bytes_received")),
                 Bytes(Num(*c, "app_bytes_sent")), Bytes(Num(*c, "app_bytes_received")),
                 Count(Num(*c, "examples_per_sec"))}});
}

std::string PlacementTable(const Json& r) {
  std::vector<Row> rows;
  for (const Json& p : Array(r, "placement_table")) {
    rows.push_back({Str(p, "variable"), "ps-" + Str(p, "ps", "?"), Bytes(Num(p, "bytes"))});
  }
  return rows.empty() ? "" : "<h2>Placement</h2>" + Table({"variable", "ps", "bytes"}, rows);
}

// ---------------------------------------------------------------------------------------------
// The page.

constexpr char kPageStyle[] =
    "body{font:14px sans-serif;margin:20px;color:#222;background:#fafafa}h1{font-size:21px;"
    "margin:0 0 4px}h2{font-size:16px;margin:26px 0 8px}.sub{color:#555;margin:0 0 12px}"
    ".cards{display:flex;flex-wrap:wrap;gap:10px}.card{background:#fff;border:1px solid #ddd;"
    "border-radius:6px;padding:8px 14px;min-width:120px}.card span{display:block;color:#666;"
    "font-size:12px}.card b{font-size:19px}.grid{display:flex;flex-wrap:wrap;gap:10px}"
    "figure{margin:0;border:1px solid #ddd;background:#fff}svg{max-width:100%;height:auto}"
    "table{border-collapse:collapse;margin:6px 0;background:#fff}td,th{border:1px solid #ccc;"
    "padding:3px 8px;text-align:right}th{background:#f0f0f0}td:first-child{text-align:left}";

std::string Card(const std::string& label, const std::string& value) {
  return absl::StrCat("<div class=\"card\"><span>", Escape(label), "</span><b>", Escape(value),
                      "</b></div>");
}

std::string Header(const Json& r) {
  auto num_or = [&](const char* key, std::string (*f)(double)) {
    return HasNum(r, key) ? f(Num(r, key)) : std::string("n/a");
  };
  auto accuracy = [](double v) { return Fmt(v, 4); };
  std::string html = absl::StrCat(
      "<h1>Fulcrum run ", Escape(Str(r, "run_id", "(no run id)")), "</h1><p class=\"sub\">",
      Escape(absl::StrCat(Str(r, "model", "?"), " on ", Str(r, "dataset", "?"), ", ",
                          Str(r, "mode", "?"), ", ", Str(r, "num_ps", "?"), " ps + ",
                          Str(r, "num_workers", "?"), " workers, ", Str(r, "optimizer", "?"),
                          ", batch ", Str(r, "batch_size", "?"),
                          "; stop: ", Str(r, "stop_reason", "?"))),
      "</p><div class=\"cards\">");
  html += Card("final test accuracy", num_or("final_test_accuracy", accuracy));
  html += Card("final test loss", num_or("final_test_loss", accuracy));
  html += Card("global step", num_or("global_step", Count));
  html += Card("examples/sec (workers)", num_or("workers_examples_per_sec", Count));
  html += Card("train time", num_or("train_seconds", Seconds));
  html += Card("time to target accuracy", num_or("time_to_target_accuracy_seconds", Seconds));
  return html + "</div>";
}

std::string Page(const Json& r) {
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fulcrum run ",
      Escape(Str(r, "run_id", "report")), "</title><style>", kPageStyle, "</style></head><body>",
      Header(r), Charts(r), RunTable(r), TaskTable(r), HostTable(r), ClusterTable(r),
      PlacementTable(r), "</body></html>\n");
}

std::string FallbackPage(const std::string& why) {
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fulcrum run "
      "report</title></head><body><p>report.html could not be drawn (",
      Escape(why), "); report.json has the figures.</p></body></html>\n");
}

}  // namespace

std::string RenderReportHtml(const nlohmann::json& report) {
  // The checks above should leave nothing to throw; should one be missed, the run still gets a
  // page (and report.json) rather than a chief that dies at the very end.
  try {
    return Page(report);
  } catch (const std::exception& e) {
    return FallbackPage(e.what());
  } catch (...) {
    return FallbackPage("unknown error");
  }
}

}  // namespace fulcrum::chief
