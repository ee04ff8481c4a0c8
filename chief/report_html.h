// chief: report.html, drawn from report.json by the project's one report renderer
// (scripts/render_report.py over scripts/fulcrum_report, matplotlib; bench/sweep.py draws its
// pages with the same code) in a child process with a deadline. The chief holds no chart code.
// Thread-safety: thread-compatible; each call runs and reaps its own child process.
#pragma once

#include <filesystem>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace fulcrum::chief {

// How long the chief waits for the renderer before it kills it.
inline constexpr absl::Duration kReportHtmlTimeout = absl::Seconds(60);

// The command that draws a page: `interpreter script REPORT_JSON OUT_HTML`.
struct ReportRenderer {
  // Debian's interpreter: python3-matplotlib is installed for it, not for others on PATH.
  std::filesystem::path interpreter = "/usr/bin/python3";
  std::filesystem::path script;  // render_report.py
};

// The renderer the build put beside the running binary: render_report.py (and the
// fulcrum_report package) in the directory of /proc/self/exe, i.e. build/bin. Both are
// copied there from scripts/ at build time.
ReportRenderer DefaultReportRenderer();

// Runs `renderer` on report_json, which writes report_html atomically (a temporary file
// renamed into place); kills it after `timeout`. Never writes report_json. Returns
// NotFound when the interpreter or the script is missing, DeadlineExceeded on timeout
// (the temporary file is removed), Internal with the renderer's last output when it
// fails. A failure here leaves any earlier report_html as it was.
absl::Status WriteReportHtml(const std::filesystem::path& report_json,
                             const std::filesystem::path& report_html, absl::Duration timeout,
                             const ReportRenderer& renderer);

// The same with DefaultReportRenderer().
absl::Status WriteReportHtml(const std::filesystem::path& report_json,
                             const std::filesystem::path& report_html,
                             absl::Duration timeout = kReportHtmlTimeout);

}  // namespace fulcrum::chief
