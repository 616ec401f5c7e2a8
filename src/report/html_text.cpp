#include "html_text.h"

#include <cstdint>

namespace posenc::report::detail {

std::string escape_html(std::string_view text) {
  std::string s;
  s.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': s += "&amp;"; break;
      case '<': s += "&lt;"; break;
      case '>': s += "&gt;"; break;
      case '"': s += "&quot;"; break;
      default: s += c;
    }
  }
  return s;
}

std::string base64(const std::vector<unsigned char>& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  s.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t k = 0; k < bytes.size(); k += 3) {
    const uint32_t b0 = bytes[k];
    const uint32_t b1 = k + 1 < bytes.size() ? bytes[k + 1] : 0;
    const uint32_t b2 = k + 2 < bytes.size() ? bytes[k + 2] : 0;
    const uint32_t v = (b0 << 16) | (b1 << 8) | b2;
    s += kAlphabet[(v >> 18) & 63];
    s += kAlphabet[(v >> 12) & 63];
    s += k + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    s += k + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return s;
}

std::string png_data_uri(const std::vector<unsigned char>& png) { return "data:image/png;base64," + base64(png); }

const char* const kImagesLoadedScript = R"(
<script>
window.addEventListener('load', function () {
  var images = document.getElementsByTagName('img');
  var loaded = 0;
  for (var k = 0; k < images.length; k++) if (images[k].naturalWidth > 0) loaded++;
  document.body.setAttribute('data-images', String(images.length));
  document.body.setAttribute('data-images-loaded', String(loaded));
});
</script>
)";

}  // namespace posenc::report::detail
