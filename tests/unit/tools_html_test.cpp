// The HTML summary: self-contained (no network, no scripts) and actually rendered by a browser.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "harness/results/html_report.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
using lina::testing::data;

std::string page() {
  std::vector<SummaryFile> files{load_summary_file(data("verify_ok.json")), load_summary_file(data("compare_ok.json")),
                                 load_summary_file(data("run_ok.json"))};
  return render_summary_html(files, {5.0, 0});
}

TEST(ToolsHtml, PageIsSelfContained) {
  const std::string h = page();
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* banned : {"<script", "http://", "https://", "@import", "url(", "<link", "@font-face", "<img"}) {
    EXPECT_EQ(h.find(banned), std::string::npos) << banned;
  }
  // verify and compare files: change, latency and roofline charts; the run file: roofline only.
  size_t svgs = 0;
  for (size_t p = h.find("<svg"); p != std::string::npos; p = h.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 7u);
  EXPECT_NE(h.find("REGRESSION"), std::string::npos);
  EXPECT_NE(h.find("UNVERIFIED"), std::string::npos);
  EXPECT_NE(h.find("<li class=\"bad\">FAILED check: chunk_gla bwd B1_T8192_H96_D128 (head)</li>"), std::string::npos);
}

TEST(ToolsHtml, FileContentIsEscaped) {
  SummaryFile f;
  f.path = "x.json";
  f.kind = "run";
  f.command = "lina run --json '<script>alert(1)</script>'";
  SummaryRow r;
  r.op = "chunk_gla";
  r.mode = "fwd";
  r.shape = "<img src=x onerror=alert(1)>";
  r.median_ms = 1;
  r.frac_hbm = 0.5;
  f.rows.push_back(r);
  const std::string h = render_summary_html({f}, {});
  EXPECT_EQ(h.find("<script>"), std::string::npos);
  EXPECT_EQ(h.find("<img"), std::string::npos);
  EXPECT_NE(h.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
}

// Decodes an 8-bit RGB/RGBA PNG with Python's standard zlib and prints
// "<distinct colors> <has green bar> <has red bar> <has blue bar>".
constexpr const char* kPngProbe = R"PY(
import struct, sys, zlib
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, w = 8, b'', 0
while pos < len(b):
    n, t = struct.unpack('>I4s', b[pos:pos + 8]); d = b[pos + 8:pos + 8 + n]; pos += 12 + n
    if t == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', d[:10])
    elif t == b'IDAT': idat += d
assert depth == 8 and ctype in (2, 6), 'unexpected PNG format'
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
prev, colors, i = bytearray(stride), set(), 0
for y in range(h):
    f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0; up = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + up) & 255
        elif f == 3: line[x] = (line[x] + (a + up) // 2) & 255
        elif f == 4:
            p = a + up - c; pa, pb, pc = abs(p - a), abs(p - up), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
    colors.update(bytes(line[k:k + 3]) for k in range(0, stride, bpp)); prev = line
print(len(colors), int(bytes.fromhex('2a8a3a') in colors), int(bytes.fromhex('c0392b') in colors),
      int(bytes.fromhex('2e86de') in colors))
)PY";

TEST(ToolsHtml, RendersInHeadlessChromium) {
  auto chromium = find_on_path("chromium");
  if (!chromium) chromium = find_on_path("chromium-browser");
  if (!chromium) GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh installs the Debian package `chromium`)";
  if (!find_on_path("python3")) GTEST_SKIP() << "python3 not installed (used to decode the PNG)";
  lina::testing::TempDir tmp;
  const auto html = tmp.path / "summary.html";
  const auto png = tmp.path / "out.png";
  write_text_file(html, page());
  auto r = run_process({chromium->string(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--user-data-dir=" + (tmp.path / "profile").string(), "--screenshot=" + png.string(),
                        "--window-size=1200,1600", "file://" + html.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(png)) << r.err;
  auto probe = run_process({"python3", "-c", kPngProbe, png.string()});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  std::istringstream in(probe.out);
  int colors = 0, green = 0, red = 0, blue = 0;
  in >> colors >> green >> red >> blue;
  EXPECT_GT(colors, 20) << "screenshot looks blank";
  EXPECT_EQ(green, 1) << "the faster-cell bar (#2a8a3a) is not on the page";
  EXPECT_EQ(red, 1) << "the slower-cell bar (#c0392b) is not on the page";
  EXPECT_EQ(blue, 1) << "the head latency bar (#2e86de) is not on the page";
}

}  // namespace
}  // namespace lina::harness
