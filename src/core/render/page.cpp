#include "page.hpp"

#include <fmt/format.h>

#include "buffer_view.hpp"
#include "svg.hpp"

namespace paramlayout::render {

std::string page_start(double height, const Palette& palette) {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0} {1:.0f}\" font-family=\"sans-serif\">\n"
      "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c8c8c8\" stroke-width=\"2\"/>"
      "</pattern><style>.t{{font-size:16px;font-weight:bold}} .h{{font-size:12px}} "
      ".s{{font-size:10px;fill:#333}} .pad{{fill:url(#hatch);stroke:#999;stroke-width:0.5}} "
      ".p{{stroke:#fff;stroke-width:0.4}} .grid{{stroke:#999;stroke-width:0.5;fill:none}} "
      ".use{{fill:#9ab8de}} .sw{{stroke:#444;stroke-width:0.5}} .mp{{fill:#5b8def}} "
      ".mg{{fill:#f2a65a}} .mo{{fill:#7cc47c}} {2}</style></defs>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kPageWidth, height, palette.css());
}

double draw_legend(std::string& out, double y, const Palette& palette,
                   const std::vector<bool>& used) {
  out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"h\">colours</text>\n", kMargin, y + 11);
  double x = kPlotLeft;
  const auto entry = [&](const std::string& css, const std::string& label) {
    const double width = 24 + 6.2 * static_cast<double>(label.size());
    if (x + width > kPageWidth - kMargin) {
      x = kPlotLeft;
      y += 18;
    }
    out += fmt::format(
        "<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"s\">{}</text>\n",
        css, x, y, x + 18, y + 11, escape(label));
    x += width + 12;
  };
  entry("pad", "padding");
  const std::vector<Colour> colours = palette.all();
  for (std::size_t i = 0; i < colours.size(); ++i) {
    if (used[i]) entry("sw " + Palette::css_class(colours[i]), palette.label(colours[i]));
  }
  return y + 28;
}

}  // namespace paramlayout::render
