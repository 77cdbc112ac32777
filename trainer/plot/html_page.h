// A self-contained HTML page: a title, inline CSS, an introduction and sections, and (only where a
// feature needs one, such as sorting a table) an inline script. Nothing is fetched: no external
// style sheet, font, image or script, so a report opens offline and from a copied directory.
// Standard library only.
#pragma once

#include <string>
#include <vector>

namespace wavetrain::plot {

struct Section {
  std::string id;       // the <section>'s id; "" for none
  std::string heading;  // its <h2>, escaped; "" for none
  std::string html;     // its markup, as is
};

struct Page {
  std::string title;                  // <title> and the <h1>, escaped
  std::string css;                    // added after the base style (kBaseCss)
  std::string intro;                  // markup between the <h1> and the first section
  std::vector<Section> sections;
  std::string script;                 // inline JavaScript at the end of the body; "" for none
};

// The style every page starts from: a readable column, tables, code and <pre> blocks.
extern const char* const kBaseCss;

std::string render_page(const Page& page);

}  // namespace wavetrain::plot
