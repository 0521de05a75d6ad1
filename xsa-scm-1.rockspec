-- LuaRocks package of xsa: `luarocks make` in the checkout builds the Lua
-- module (xsa.so, the C core inside it), and installs it with the Lua
-- modules of lua/xsa/, the GPT-2 tokenizer files and the `xsa` executable
-- into a rocks tree; then `lua5.4 -e 'require "xsa"'` works from any folder
-- (with the tree on the Lua paths: `eval "$(luarocks path)"`).
-- The build is the Makefile's (targets rock and rock-install), so it needs
-- what `make` needs: the packages of mk/deps.sh.
rockspec_format = "3.0"
package = "xsa"
version = "scm-1"
source = {
   url = "git+file:///dev/null", -- unused by `luarocks make` (it builds the checkout it runs in)
}
description = {
   summary = "Exclusive Self Attention vs self attention in small GPT models: a C engine scripted in Lua",
   detailed = [[
Tensors on OpenBLAS, reverse-mode autograd, fused transformer kernels (SA and
XSA attention), a GPT-2-style model with text generation, GPT-2 BPE,
safetensors checkpoints, figures through gnuplot and the study's scripts.
]],
   labels = {"machine-learning", "transformers", "attention"},
}
dependencies = {
   "lua >= 5.4, < 5.5",
}
build = {
   type = "make",
   build_target = "rock",
   build_variables = {
      EXTRA_CFLAGS = "$(CFLAGS)",
   },
   install_target = "rock-install",
   install_variables = {
      LUADIR = "$(LUADIR)",
      LIBDIR = "$(LIBDIR)",
      BINDIR = "$(BINDIR)",
   },
}
