#include "chief/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fulcrum::chief {
namespace {

using Json = nlohmann::json;

// Colors for series, cycled (Tableau 10).
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

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

// Type-checked reads: a report from an older or damaged run must still render.
const Json* Get(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}
double Num(const Json& j, const char* key, double fallback = 0.0) {
  const Json* v = Get(j, key);
  return v != nullptr && v->is_number() ? v->get<double>() : fallback;
}
bool HasNum(const Json& j, const char* key) {
  const Json* v = Get(j, key);
  return v != nullptr && v->is_number();
}
std::string Str(const Json& j, const char* key, const std::string& fallback = "") {
  const Json* v = Get(j, key);
  if (v == nullptr) return fallback;
  if (v->is_string()) return v->get<std::string>();
  return v->dump();
}
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

std::string Fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}
std::string Bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (std::abs(b) >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return absl::StrCat(Fmt(b, u == 0 ? 0 : 1), " ", units[u]);
}
std::string Count(double v) {
  if (std::abs(v) >= 1e6) return absl::StrCat(Fmt(v / 1e6, 2), "M");
  if (std::abs(v) >= 1e4) return absl::StrCat(Fmt(v / 1e3, 1), "k");
  if (v == std::floor(v)) return Fmt(v, 0);
  std::string text = Fmt(v, 3);  // 1.500 -> 1.5
  while (text.back() == '0') text.pop_back();
  return text;
}

// Each SVG carries its own style and background, so a chart saved from the page renders the
// same on its own.
constexpr char kSvgStyle[] =
    "<style>.t{font:13px sans-serif;text-anchor:middle}.xl{font:11px sans-serif;"
    "text-anchor:middle}.yl{font:11px sans-serif;text-anchor:end}.lg{font:11px sans-serif}"
    ".g{stroke:#eee}.a{stroke:#888}text{fill:#222}</style>";

std::string SvgOpen(double w, double h, const std::string& title) {
  return absl::StrCat("<figure><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", w, " ", h,
                      "\" width=\"", w, "\" height=\"", h, "\" role=\"img\">", kSvgStyle,
                      "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/><title>", Escape(title),
                      "</title><text x=\"", w / 2, "\" y=\"18\" class=\"t\">", Escape(title),
                      "</text>");
}

// A task's name from its summary ("worker-1").
std::string TaskName(const Json& s, const std::string& job) {
  return absl::StrCat(Str(s, "job", job), "-", static_cast<int>(Num(s, "task_index")));
}

struct Series {
  std::string name;
  std::vector<double> x, y;
  bool dashed = false;
};

// "Nice" axis ticks covering [lo, hi].
std::vector<double> Ticks(double lo, double hi, int target = 5) {
  std::vector<double> t;
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
  return t;
}

// An SVG line chart: x and y axes with ticks, one polyline per series, a legend.
std::string LineChart(const std::string& title, const std::string& x_label,
                      const std::string& y_label, const std::vector<Series>& series,
                      std::string (*y_format)(double) = Count) {
  constexpr double kW = 560, kH = 300, kL = 78, kR = 16, kT = 28, kB = 44;
  double x0 = std::numeric_limits<double>::max(), x1 = -x0, y1 = 0.0, y0 = 0.0;
  size_t points = 0;
  for (const Series& s : series) {
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
      ++points;
    }
  }
  std::string svg = SvgOpen(kW, kH, title);
  if (points == 0) {
    absl::StrAppend(&svg, "<text x=\"", kW / 2, "\" y=\"", kH / 2,
                    "\" class=\"t\">no data</text></svg></figure>");
    return svg;
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const std::vector<double> yt = Ticks(y0, y1), xt = Ticks(x0, x1);
  y1 = std::max(y1, yt.back());
  auto px = [&](double x) { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); };
  auto py = [&](double y) { return kH - kB - (y - y0) / (y1 - y0) * (kH - kT - kB); };
  for (double v : yt) {
    absl::StrAppend(&svg, "<line x1=\"", kL, "\" x2=\"", kW - kR, "\" y1=\"", Fmt(py(v), 1),
                    "\" y2=\"", Fmt(py(v), 1), "\" class=\"g\"/><text x=\"", kL - 4, "\" y=\"",
                    Fmt(py(v) + 4, 1), "\" class=\"yl\">", Escape(y_format(v)), "</text>");
  }
  for (double v : xt) {
    absl::StrAppend(&svg, "<text x=\"", Fmt(px(v), 1), "\" y=\"", kH - kB + 16, "\" class=\"xl\">",
                    Escape(Count(v)), "</text>");
  }
  absl::StrAppend(&svg, "<line x1=\"", kL, "\" x2=\"", kL, "\" y1=\"", kT, "\" y2=\"", kH - kB,
                  "\" class=\"a\"/><line x1=\"", kL, "\" x2=\"", kW - kR, "\" y1=\"", kH - kB,
                  "\" y2=\"", kH - kB, "\" class=\"a\"/><text x=\"", (kL + kW - kR) / 2, "\" y=\"",
                  kH - 8, "\" class=\"xl\">", Escape(x_label),
                  "</text><text transform=\"translate(14,", (kT + kH - kB) / 2,
                  ") rotate(-90)\" class=\"xl\">", Escape(y_label), "</text>");
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    std::string pts;
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      absl::StrAppend(&pts, Fmt(px(s.x[i]), 1), ",", Fmt(py(s.y[i]), 1), " ");
    }
    const char* color = kColors[k % std::size(kColors)];
    absl::StrAppend(&svg, "<polyline fill=\"none\" stroke=\"", color, "\" stroke-width=\"1.6\"",
                    s.dashed ? " stroke-dasharray=\"5 3\"" : "", " points=\"", pts, "\"><title>",
                    Escape(s.name), "</title></polyline>");
    const double ly = kT + 4 + 14.0 * static_cast<double>(k);
    absl::StrAppend(&svg, "<rect x=\"", kW - kR - 150, "\" y=\"", ly,
                    "\" width=\"10\" height=\"3\" fill=\"", color, "\"/><text x=\"", kW - kR - 136,
                    "\" y=\"", ly + 5, "\" class=\"lg\">", Escape(s.name), "</text>");
  }
  svg += "</svg></figure>";
  return svg;
}

struct Bar {
  std::string label;
  std::vector<double> parts;  // stacked
};

// Horizontal stacked bars with a legend for the parts.
std::string BarChart(const std::string& title, const std::vector<std::string>& part_names,
                     const std::vector<Bar>& bars, std::string (*format)(double)) {
  constexpr double kW = 560, kL = 150, kR = 90, kT = 40, kRow = 22;
  const double h = kT + kRow * static_cast<double>(std::max<size_t>(bars.size(), 1)) + 12;
  double max_total = 0.0;
  for (const Bar& b : bars) {
    double t = 0.0;
    for (double p : b.parts) t += std::isfinite(p) && p > 0 ? p : 0.0;
    max_total = std::max(max_total, t);
  }
  std::string svg = SvgOpen(kW, h, title);
  if (bars.empty() || max_total <= 0) {
    absl::StrAppend(&svg, "<text x=\"", kW / 2, "\" y=\"", h - 10,
                    "\" class=\"t\">no data</text></svg></figure>");
    return svg;
  }
  for (size_t p = 0; p < part_names.size(); ++p) {
    const double lx = 12 + 88.0 * static_cast<double>(p);
    absl::StrAppend(&svg, "<rect x=\"", lx, "\" y=\"26\" width=\"10\" height=\"8\" fill=\"",
                    kColors[p % std::size(kColors)], "\"/><text x=\"", lx + 13,
                    "\" y=\"34\" class=\"lg\">", Escape(part_names[p]), "</text>");
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const double y = kT + kRow * static_cast<double>(i);
    absl::StrAppend(&svg, "<text x=\"", kL - 6, "\" y=\"", y + 14, "\" class=\"yl\">",
                    Escape(bars[i].label), "</text>");
    double x = kL, total = 0.0;
    for (size_t p = 0; p < bars[i].parts.size(); ++p) {
      const double v =
          std::isfinite(bars[i].parts[p]) && bars[i].parts[p] > 0 ? bars[i].parts[p] : 0.0;
      const double w = v / max_total * (kW - kL - kR);
      absl::StrAppend(
          &svg, "<rect x=\"", Fmt(x, 1), "\" y=\"", y + 3, "\" width=\"", Fmt(w, 1),
          "\" height=\"15\" fill=\"", kColors[p % std::size(kColors)], "\"><title>",
          Escape(absl::StrCat(bars[i].label, " ", p < part_names.size() ? part_names[p] : "", ": ",
                              format(v))),
          "</title></rect>");
      x += w;
      total += v;
    }
    absl::StrAppend(&svg, "<text x=\"", Fmt(x + 4, 1), "\" y=\"", y + 14, "\" class=\"lg\">",
                    Escape(format(total)), "</text>");
  }
  svg += "</svg></figure>";
  return svg;
}

// Every task summary of the report with its name, chief first.
std::vector<std::pair<std::string, const Json*>> Summaries(const Json& r) {
  std::vector<std::pair<std::string, const Json*>> out;
  if (const Json* c = Get(r, "chief"); c != nullptr && c->is_object()) {
    out.emplace_back(TaskName(*c, "chief"), c);
  }
  for (const char* key : {"ps", "workers"}) {
    for (const Json& s : Array(r, key)) {
      if (s.is_object())
        out.emplace_back(TaskName(s, key == std::string("ps") ? "ps" : "worker"), &s);
    }
  }
  return out;
}

// The earliest unix time of any series: the charts' time zero.
double TimeZero(const Json& r) {
  double t0 = std::numeric_limits<double>::max();
  for (const auto& [name, s] : Summaries(r)) {
    const Json* series = Get(*s, "series");
    if (series == nullptr) continue;
    for (const char* part : {"samples", "steps"}) {
      const Json* p = Get(*series, part);
      if (p == nullptr) continue;
      for (double t : Numbers(*p, "unix_s")) {
        if (std::isfinite(t)) t0 = std::min(t0, t);
      }
    }
  }
  return t0 == std::numeric_limits<double>::max() ? 0.0 : t0;
}

std::vector<double> Shift(std::vector<double> v, double t0) {
  for (double& x : v) x -= t0;
  return v;
}

std::string Pct(double v) { return absl::StrCat(Fmt(v, 0), "%"); }
std::string Mb(double v) { return absl::StrCat(Fmt(v, 0), " MB"); }
std::string BytesPerSec(double v) { return absl::StrCat(Bytes(v), "/s"); }
std::string Ms(double v) { return absl::StrCat(Fmt(v, 2), " ms"); }

std::string Charts(const Json& r) {
  const double t0 = TimeZero(r);
  const auto summaries = Summaries(r);
  std::vector<Series> rate, loss, cpu, rss;
  for (const auto& [name, s] : summaries) {
    const Json* series = Get(*s, "series");
    if (series == nullptr) continue;
    if (const Json* st = Get(*series, "steps"); st != nullptr) {
      const std::vector<double> t = Shift(Numbers(*st, "unix_s"), t0);
      rate.push_back({name, t, Numbers(*st, "examples_per_sec")});
      loss.push_back({name, t, Numbers(*st, "loss")});
    }
    if (const Json* sa = Get(*series, "samples"); sa != nullptr) {
      const std::vector<double> t = Shift(Numbers(*sa, "unix_s"), t0);
      cpu.push_back({name, t, Numbers(*sa, "cpu_percent")});
      std::vector<double> mb = Numbers(*sa, "rss_bytes");
      for (double& v : mb) v /= 1e6;
      rss.push_back({name, t, mb});
    }
  }
  std::string html = "<h2>Throughput, CPU and memory</h2><div class=\"grid\">";
  html += LineChart("Examples/sec per worker", "seconds", "examples/sec", rate);
  html += LineChart("Process CPU per task (100% = one core)", "seconds", "CPU %", cpu, Pct);
  html += LineChart("Resident memory per task", "seconds", "RSS (MB)", rss, Mb);
  // Loss per worker over time, and the chief's evaluations against the global step.
  html += LineChart("Training loss per worker", "seconds", "loss", loss);
  std::vector<Series> evals(2);
  evals[0].name = "test accuracy";
  evals[1].name = "test loss";
  evals[1].dashed = true;
  for (const Json& e : Array(r, "evals")) {
    if (HasNum(e, "test_accuracy")) {
      evals[0].x.push_back(Num(e, "global_step"));
      evals[0].y.push_back(Num(e, "test_accuracy"));
    }
    evals[1].x.push_back(Num(e, "global_step"));
    evals[1].y.push_back(Num(e, "test_loss"));
  }
  html += LineChart("Chief's evaluations", "global step", "accuracy / loss", evals);
  html += "</div><h2>Network</h2><div class=\"grid\">";
  // One chart per host: its tasks share the interfaces; the first task with samples speaks.
  std::map<std::string, bool> drawn;
  for (const auto& [name, s] : summaries) {
    const std::string host = Str(*s, "host", "unknown");
    const Json* series = Get(*s, "series");
    const Json* sa = series != nullptr ? Get(*series, "samples") : nullptr;
    const Json* net = sa != nullptr ? Get(*sa, "network") : nullptr;
    if (net == nullptr || !net->is_object() || drawn[host]) continue;
    drawn[host] = true;
    const std::vector<double> t = Shift(Numbers(*sa, "unix_s"), t0);
    std::vector<Series> lines;
    for (const auto& [iface, v] : net->items()) {
      const std::string kind = iface == "lo" ? " (loopback)" : " (external)";
      lines.push_back({absl::StrCat(iface, kind, " rx"), t, Numbers(v, "rx_bytes_per_sec")});
      lines.push_back({absl::StrCat(iface, kind, " tx"), t, Numbers(v, "tx_bytes_per_sec"), true});
    }
    html += LineChart(absl::StrCat("Interfaces of host ", host, " (seen by ", name, ")"), "seconds",
                      "bytes/s", lines, BytesPerSec);
  }
  std::vector<Bar> peers;
  for (const auto& [name, s] : summaries) {
    for (const Json& p : Array(*s, "peer_traffic")) {
      peers.push_back({absl::StrCat(name, " \u2192 ", Str(p, "peer", "?")),
                       {Num(p, "bytes_sent"), Num(p, "bytes_received")}});
    }
  }
  html += BarChart("Application traffic per peer", {"sent", "received"}, peers, Bytes);
  html += "</div><h2>Where a worker's step goes</h2><div class=\"grid\">";
  std::vector<Bar> phases;
  const std::vector<std::string> names = {"data",     "pull", "forward",
                                          "backward", "push", "sync_wait"};
  for (const auto& [name, s] : summaries) {
    const Json* m = Get(*s, "step_phase_mean_ms");
    if (m == nullptr) continue;
    Bar b{name, {}};
    for (const std::string& n : names) b.parts.push_back(Num(*m, n.c_str()));
    phases.push_back(std::move(b));
  }
  html += BarChart("Mean step time by phase", names, phases, Ms);
  html += "</div>";
  return html;
}

std::string Table(const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows) {
  std::string html = "<table><tr>";
  for (const std::string& h : head) absl::StrAppend(&html, "<th>", Escape(h), "</th>");
  html += "</tr>";
  for (const auto& row : rows) {
    html += "<tr>";
    for (const std::string& c : row) absl::StrAppend(&html, "<td>", Escape(c), "</td>");
    html += "</tr>";
  }
  return html + "</table>";
}

std::string Tables(const Json& r) {
  std::string html = "<h2>Run</h2>";
  std::vector<std::vector<std::string>> run;
  for (const char* key : {"run_id",           "model",
                          "dataset",          "mode",
                          "optimizer",        "learning_rate",
                          "batch_size",       "num_ps",
                          "num_workers",      "placement",
                          "train_steps",      "global_step",
                          "stop_reason",      "final_test_accuracy",
                          "final_test_loss",  "time_to_target_accuracy_seconds",
                          "train_seconds",    "wall_seconds",
                          "examples_per_sec", "workers_examples_per_sec"}) {
    if (const Json* v = Get(r, key); v != nullptr) {
      run.push_back({key, v->is_number_float() ? Fmt(v->get<double>(), 4) : Str(r, key)});
    }
  }
  html += Table({"key", "value"}, run);
  html += "<h2>Tasks</h2>";
  std::vector<std::vector<std::string>> tasks;
  for (const Json& t : Array(r, "tasks")) {
    tasks.push_back({Str(t, "task"), Str(t, "host"), Pct(Num(t, "cpu_percent_mean")),
                     Pct(Num(t, "cpu_percent_max")), Bytes(Num(t, "peak_rss_bytes")),
                     Bytes(Num(t, "loopback_bytes_sent")), Bytes(Num(t, "loopback_bytes_received")),
                     Bytes(Num(t, "external_bytes_sent")), Bytes(Num(t, "external_bytes_received")),
                     Bytes(Num(t, "app_bytes_sent")), Bytes(Num(t, "app_bytes_received")),
                     HasNum(t, "examples_per_sec") ? Count(Num(t, "examples_per_sec")) : ""});
  }
  html += Table({"task", "host", "CPU mean", "CPU max", "peak RSS", "lo out", "lo in",
                 "external out", "external in", "app sent", "app received", "examples/sec"},
                tasks);
  html += "<h2>Hosts</h2>";
  std::vector<std::vector<std::string>> hosts;
  for (const Json& h : Array(r, "hosts")) {
    std::string names;
    for (const Json& t : Array(h, "tasks")) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", t.is_string() ? t.get<std::string>() : "");
    }
    hosts.push_back({Str(h, "host"), names, Pct(Num(h, "cpu_percent_mean")),
                     Bytes(Num(h, "peak_rss_bytes")), Bytes(Num(h, "loopback_bytes_sent")),
                     Bytes(Num(h, "external_bytes_sent")),
                     Bytes(Num(h, "external_bytes_received"))});
  }
  html += Table(
      {"host", "tasks", "CPU (sum)", "peak RSS (sum)", "lo", "external out", "external in"}, hosts);
  if (const Json* c = Get(r, "cluster"); c != nullptr) {
    html += "<h2>Cluster</h2>";
    html +=
        Table({"tasks", "hosts", "CPU seconds", "peak RSS (sum)", "external out", "external in",
               "app bytes sent", "examples/sec (workers)"},
              {{Count(Num(*c, "tasks")), Count(Num(*c, "hosts")), Fmt(Num(*c, "cpu_seconds"), 1),
                Bytes(Num(*c, "peak_rss_bytes")), Bytes(Num(*c, "external_bytes_sent")),
                Bytes(Num(*c, "external_bytes_received")), Bytes(Num(*c, "app_bytes_sent")),
                Count(Num(*c, "examples_per_sec"))}});
  }
  std::vector<std::vector<std::string>> placement;
  for (const Json& p : Array(r, "placement_table")) {
    placement.push_back(
        {Str(p, "variable"), absl::StrCat("ps-", Str(p, "ps")), Bytes(Num(p, "bytes"))});
  }
  if (!placement.empty())
    html += "<h2>Placement</h2>" + Table({"variable", "ps", "bytes"}, placement);
  return html;
}

constexpr char kStyle[] =
    "body{font:14px sans-serif;margin:20px;color:#222}h1{font-size:20px}h2{font-size:16px;"
    "margin-top:24px}.grid{display:flex;flex-wrap:wrap;gap:8px}figure{margin:0;border:1px "
    "solid #ddd}table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;"
    "padding:3px 8px;text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}"
    "";

}  // namespace

std::string RenderReportHtml(const nlohmann::json& report) {
  const Json& r = report;
  const std::string accuracy =
      HasNum(r, "final_test_accuracy") ? Fmt(Num(r, "final_test_accuracy"), 4) : std::string("n/a");
  std::string html = absl::StrCat(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fulcrum run ",
      Escape(Str(r, "run_id", "report")), "</title><style>", kStyle, "</style></head><body>");
  absl::StrAppend(&html, "<h1>Fulcrum run ", Escape(Str(r, "run_id", "?")), "</h1><p>",
                  Escape(Str(r, "model", "?")), ", ", Escape(Str(r, "mode", "?")), ", ",
                  Count(Num(r, "num_ps")), " ps + ", Count(Num(r, "num_workers")),
                  " workers; final test accuracy ", accuracy, " at global step ",
                  Count(Num(r, "global_step")), "; ", Count(Num(r, "workers_examples_per_sec")),
                  " examples/sec (workers); stop: ", Escape(Str(r, "stop_reason", "?")), "</p>");
  html += Charts(r);
  html += Tables(r);
  html += "</body></html>\n";
  return html;
}

}  // namespace fulcrum::chief
