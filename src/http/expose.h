// Reaching a private member of a third-party class (Pistache's) through the one access-check
// exemption the language gives: naming a private member in an explicit template instantiation.
// For each member, a tag type declares `friend auto member_of(Tag);` and an explicit instantiation
// `template struct Expose<Tag, &Class::member>;` defines it; member_of(Tag{}) is then a pointer to
// that member.
#pragma once

namespace gw::http {
// In each translation unit's own unnamed namespace, with the tags it is used with there: an
// explicit instantiation must be in the template's namespace, and the friend it defines is the
// one the tag declares only if both are in the same namespace.
namespace {

template <typename Tag, auto Member>
struct Expose {
  friend auto member_of(Tag) { return Member; }
};

}  // namespace
}  // namespace gw::http
