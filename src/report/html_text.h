// Internal to posenc::report: text for the HTML pages — escaping, and the
// base64 of data: URIs (the pages embed their figures, so they stand alone).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace posenc::report::detail {

// &, <, >, " as entities: safe in text and in double-quoted attributes.
std::string escape_html(std::string_view text);
// RFC 4648 base64 with padding.
std::string base64(const std::vector<unsigned char>& bytes);
// <img src="data:image/png;base64,..."> of a PNG.
std::string png_data_uri(const std::vector<unsigned char>& png);

// A <script> that, after the load event, records on <body> how many images
// decoded (data-images, data-images-loaded): for the headless-browser test and
// for anyone checking a page.
extern const char* const kImagesLoadedScript;

}  // namespace posenc::report::detail
