#include "core/metric_text.h"

namespace gw {

void write_metric(std::ostream& out, std::string_view name, std::string_view type,
                  std::string_view help, uint64_t value) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
      << name << " " << value << "\n";
}

}  // namespace gw
