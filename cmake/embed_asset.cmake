# Script mode (cmake -DIN=... -DOUT=... -DNAME=... -P embed_asset.cmake):
# writes OUT, a C++ source that defines tune::assets::NAME[] as the text of
# the file IN, so that pages and scripts live as files in the tree and ship
# inside the binary (tunefarm_embed_asset in TunefarmEmbed.cmake).
file(READ "${IN}" content)
string(FIND "${content}" ")tfasset\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN}: contains the raw-string delimiter )tfasset\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by cmake/embed_asset.cmake: edit that file.\n"
  "namespace tune::assets {\n"
  "extern const char ${NAME}[] = R\"tfasset(${content})tfasset\";\n"
  "}  // namespace tune::assets\n")
file(RENAME "${OUT}.tmp" "${OUT}")
