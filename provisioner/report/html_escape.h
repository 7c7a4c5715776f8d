// Text into HTML and SVG: the five characters that change meaning in
// element content and quoted attributes become entities.
#pragma once

#include <string>
#include <string_view>

namespace kiln::report {

std::string escape_html(std::string_view text);

}  // namespace kiln::report
