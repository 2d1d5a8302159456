// Text from result files on its way to a terminal: a string in a JSON file can hold escape
// sequences that move the cursor, retitle the window or hide lines.
#pragma once
#include <string>

namespace lina::harness {

// `text` with every control byte other than newline (ESC, CR, BEL, backspace, tab, DEL, ...) replaced
// by '?', one byte for one so that aligned columns stay aligned.
std::string terminal_safe(std::string text);

}  // namespace lina::harness
