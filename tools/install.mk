# tools/install.mk: `make install` and `make uninstall`. Included by the Makefile.
#
#   make install [PREFIX=/usr/local] [DESTDIR=]
#
# installs, under $(DESTDIR)$(PREFIX):
#   bin/bib
#   bin/bib-onnx             the ONNX importer (tools/bib-onnx), pointed at the
#                             Python package installed below
#   lib/libbib.so.$(VERSION), lib/$(SONAME) and lib/libbib.so (links), lib/libbib.a
#   lib/$(GLSL_PLUGIN)     the GLSL compiler libbib.so loads when it assembles GLSL
#   include/bib.h, include/bib.hpp
#   lib/pkgconfig/bib.pc      Cflags, Libs; Libs.private lists what libbib.a needs
#   share/man/man1/bib.1, share/man/man1/bib-onnx.1, share/man/man5/bib-asm.5,
#                             their @VERSION@ replaced by $(VERSION)
#   share/bash-completion/completions/bib
#   $(PYTHONDIR)/bib          the Python package (bindings/python), which finds
#                             the library in $(PREFIX)/lib
# `make uninstall` with the same PREFIX and DESTDIR removes exactly those.
# With no DESTDIR, install runs ldconfig when it can, so that programs and
# the Python package find the library by its soname.

PREFIX        ?= /usr/local
DESTDIR       ?=
BINDIR         = $(PREFIX)/bin
LIBDIR         = $(PREFIX)/lib
INCLUDEDIR     = $(PREFIX)/include
PKGCONFIGDIR   = $(LIBDIR)/pkgconfig
MANDIR         = $(PREFIX)/share/man
COMPLETIONDIR  = $(PREFIX)/share/bash-completion/completions
# Where Debian's /usr/bin/python3 looks for packages under PREFIX:
# /usr/lib/python3/dist-packages, else PREFIX/lib/python3.N/dist-packages.
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYTHONDIR     ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(LIBDIR)/python$(PYTHON_VERSION)/dist-packages)
PY_FILES       = $(wildcard bindings/python/bib/*.py)
INSTALL       ?= install

# What a program linking libbib.a needs besides it: every library the shared
# one is linked with (static shaderc and glslang included).
PC_LIBS_PRIVATE = $(strip $(LDLIBS))

$(BUILD)/bib.pc: tools/bib.pc.in include/bib.h tools/install.mk
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@LIBS_PRIVATE@|$(PC_LIBS_PRIVATE)|g' $< > $@.tmp && mv $@.tmp $@
# The prefix is written into bib.pc and the Python package: rebuild them when
# it changes.
$(BUILD)/.prefix: FORCE
	@mkdir -p $(BUILD)
	@echo '$(PREFIX) $(LIBDIR)' | cmp -s - $@ || echo '$(PREFIX) $(LIBDIR)' > $@
$(BUILD)/bib.pc: $(BUILD)/.prefix
.PHONY: FORCE install uninstall

install: all $(BUILD)/bib.pc
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
	    $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	    $(DESTDIR)$(COMPLETIONDIR) $(DESTDIR)$(PYTHONDIR)/bib
	$(INSTALL) -m 755 $(BUILD)/bib $(DESTDIR)$(BINDIR)/bib
	sed -e 's|^PYTHONDIR = None$$|PYTHONDIR = "$(PYTHONDIR)"|' tools/bib-onnx > $(DESTDIR)$(BINDIR)/bib-onnx
	chmod 755 $(DESTDIR)$(BINDIR)/bib-onnx
	$(INSTALL) -m 755 $(BUILD)/libbib.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libbib.so.$(VERSION)
	ln -sf libbib.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libbib.so
	$(INSTALL) -m 755 $(BUILD)/$(GLSL_PLUGIN) $(DESTDIR)$(LIBDIR)/$(GLSL_PLUGIN)
	$(INSTALL) -m 644 $(BUILD)/libbib.a $(DESTDIR)$(LIBDIR)/libbib.a
	$(INSTALL) -m 644 include/bib.h include/bib.hpp $(DESTDIR)$(INCLUDEDIR)/
	$(INSTALL) -m 644 $(BUILD)/bib.pc $(DESTDIR)$(PKGCONFIGDIR)/bib.pc
	for page in man1/bib.1 man1/bib-onnx.1 man5/bib-asm.5; do \
	    sed 's|@VERSION@|$(VERSION)|g' man/$${page#*/} > $(DESTDIR)$(MANDIR)/$$page && \
	    chmod 644 $(DESTDIR)$(MANDIR)/$$page || exit 1; \
	done
	$(INSTALL) -m 644 cli/completion.bash $(DESTDIR)$(COMPLETIONDIR)/bib
	$(INSTALL) -m 644 $(PY_FILES) $(DESTDIR)$(PYTHONDIR)/bib/
	printf '# Written by make install.\nLIBDIR = "%s"\n' '$(LIBDIR)' > $(DESTDIR)$(PYTHONDIR)/bib/_install.py
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/bib $(DESTDIR)$(BINDIR)/bib-onnx
	rm -f $(DESTDIR)$(LIBDIR)/libbib.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libbib.so $(DESTDIR)$(LIBDIR)/libbib.a $(DESTDIR)$(LIBDIR)/$(GLSL_PLUGIN)
	rm -f $(DESTDIR)$(INCLUDEDIR)/bib.h $(DESTDIR)$(INCLUDEDIR)/bib.hpp
	rm -f $(DESTDIR)$(PKGCONFIGDIR)/bib.pc
	rm -f $(DESTDIR)$(MANDIR)/man1/bib.1 $(DESTDIR)$(MANDIR)/man1/bib-onnx.1 $(DESTDIR)$(MANDIR)/man5/bib-asm.5
	rm -f $(DESTDIR)$(COMPLETIONDIR)/bib
	rm -rf $(DESTDIR)$(PYTHONDIR)/bib
