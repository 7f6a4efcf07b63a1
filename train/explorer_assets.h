// The step explorer's JavaScript and CSS (train/explorer/explorer.js, explorer.css), compiled in
// as text by cmake/embed_text.cmake, so that train/report.cpp writes them into every report.
#pragma once

#include <string_view>

namespace glass::train::assets {

extern const std::string_view explorer_js;
extern const std::string_view explorer_css;

}  // namespace glass::train::assets
