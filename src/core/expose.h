// Reaching a private member of a third-party class (Pistache's, libmodsecurity's) through the one
// access-check exemption the language gives: naming a private member in an explicit template
// instantiation ([temp.spec.general]). GW_EXPOSE(Tag, &Class::member) declares a type `Tag` and
// makes member_of(Tag{}) a pointer to that member. Use it in an unnamed namespace: each tag and
// the template that defines its member_of are the translation unit's own.
#pragma once

#define GW_EXPOSE(Tag, member)                    \
  struct Tag {                                    \
    friend auto member_of(Tag);                   \
  };                                              \
  template <auto Member>                          \
  struct Tag##Expose {                            \
    friend auto member_of(Tag) { return Member; } \
  };                                              \
  template struct Tag##Expose<member>
