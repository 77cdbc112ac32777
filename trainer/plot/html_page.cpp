// Self-contained HTML pages (html_page.h).
#include "trainer/plot/html_page.h"

#include "trainer/plot/svg_plot.h"

namespace wavetrain::plot {

const char* const kBaseCss =
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "td,th{padding:2px 12px 2px 0;text-align:left}pre{background:#f4f4f4;padding:8px;overflow:auto;font-size:12px}"
    "section{margin-top:1.5em}.chart{overflow-x:auto}";

std::string render_page(const Page& page) {
  std::string o = "<!doctype html><html><head><meta charset='utf-8'><title>" + escape(page.title) + "</title><style>" + kBaseCss +
                  page.css + "</style></head><body><h1>" + escape(page.title) + "</h1>" + page.intro;
  for (const Section& s : page.sections) {
    o += s.id.empty() ? "<section>" : "<section id='" + escape(s.id) + "'>";
    if (!s.heading.empty()) o += "<h2>" + escape(s.heading) + "</h2>";
    o += s.html + "</section>";
  }
  // At the end of the body, so that the script finds every element it works on already parsed.
  if (!page.script.empty()) o += "<script>" + page.script + "</script>";
  return o + "</body></html>\n";
}

}  // namespace wavetrain::plot
