// The report as one web page: `hangtrace analyze --html report.html`, and
// report.html beside the automatic report's text. One self-contained file
// (no network, no external script, style or font) that opens offline in
// any browser: the verdict and culprits with their evidence, the classes,
// the wait-for graph, the merged stack tree with the user's frames set
// apart, each shown rank's last calls per communicator, a timeline of the
// last seconds, mismatches and cycles, and how the job ended.
//
// The page is the same diagnosis as the text and the JSON: the data it
// shows is the JSON report (docs/JSON.md) and a few views of the job built
// here, embedded in the page (merger/report_page.html) and drawn by its
// script. It stays small at any scale: rank sets as ranges, and per-rank
// details only for the culprits and one rank of each class (the rest:
// `hangtrace inspect`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "merger/diagnose.h"
#include "merger/model.h"

namespace hangtrace {

// The data the page draws: the JSON report (without its per-rank lists and
// raw stacks) and the views below. Public for the tests.
nlohmann::json HtmlPageData(const Job& job, const Diagnosis& d, const std::string& text_report);

// The whole page.
std::string HtmlReport(const Job& job, const Diagnosis& d, const std::string& text_report);

}  // namespace hangtrace
