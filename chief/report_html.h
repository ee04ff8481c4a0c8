// chief: report.html, the run report as one self-contained page (inline SVG charts, no
// network). Thread-safety: pure function.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace fulcrum::chief {

// The run report as one self-contained HTML page (inline SVG charts, no network).
std::string RenderReportHtml(const nlohmann::json& report);

}  // namespace fulcrum::chief
