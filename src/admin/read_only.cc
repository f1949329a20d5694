#include "admin/read_only.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

namespace gw::admin {

std::optional<Error> unusable_data_dir(const std::string& data_dir) {
  std::error_code ec;
  if (std::filesystem::exists(data_dir + "/CURRENT", ec)) return std::nullopt;
  if (ec) return make_error(Code::kUnavailable, "cannot read " + data_dir + ": " + ec.message());
  return make_error(Code::kUnavailable, data_dir + " holds no gatewayd database");
}

Result<std::unique_ptr<ReadOnlyStore>> ReadOnlyStore::open(const std::string& data_dir) {
  if (auto unusable = unusable_data_dir(data_dir)) return std::move(*unusable);
  std::error_code ec;
  std::string scratch = (std::filesystem::temp_directory_path(ec) / "gatewayctl-XXXXXX").string();
  if (::mkdtemp(scratch.data()) == nullptr) {
    return make_error(Code::kUnavailable, "cannot create a scratch directory under " +
                                              std::filesystem::temp_directory_path(ec).string());
  }
  std::unique_ptr<ReadOnlyStore> out(new ReadOnlyStore());
  out->scratch_dir_ = scratch;
  out->removed_on_interrupt_ = std::make_unique<RemovedOnInterrupt>(scratch);
  if (!Store::locked_by_another_process(data_dir)) {
    if (auto missing = Store::check_table_files(data_dir, scratch)) {
      return make_error(Code::kUnavailable, "cannot read " + data_dir + ": " + missing->detail);
    }
  }
  auto store = Store::open_secondary(data_dir, scratch);
  if (!store.ok()) {
    return make_error(Code::kUnavailable, "cannot read " + data_dir + ": " + store.error().detail);
  }
  out->store_ = std::move(store.value());
  return out;
}

ReadOnlyStore::~ReadOnlyStore() {
  store_.reset();
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir_, ec);
}

}  // namespace gw::admin
