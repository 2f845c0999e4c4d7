/* settings.c: the one configuration table's engine (settings.h): typed parsing from the
 * environment and the command line into the owners' storage, --help, the Markdown reference. */
#include "settings.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define FIELD(g, s, T) ((T *)((char *)(g)->base + (s)->offset))
#define CFIELD(g, s, T) ((const T *)((const char *)(g)->base + (s)->offset))

/* A whole number >= 0 with an optional binary suffix (k, M, G, T; "MiB" and "MB" read the same). */
static int parse_count(const char *s, int64_t *out) {
  if (!*s) return -1;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v < 0) return -1;
  int shift = 0;
  if (*end) {
    const char *units = "kKmMgGtT";
    const char *u = strchr(units, *end);
    if (!u) return -1;
    shift = 10 * (1 + (int)(u - units) / 2);
    end++;
    if (*end == 'i' && end[1] == 'B')
      end += 2;
    else if (*end == 'B')
      end++;
  }
  if (*end) return -1;
  if (shift && v > (INT64_MAX >> shift)) return -1;
  *out = (int64_t)v << shift;
  return 0;
}

/* The index of value among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *value) {
  size_t vl = strlen(value);
  int k = 0;
  for (const char *p = choices; *p; k++) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n == vl && memcmp(p, value, n) == 0) return k;
    if (!bar) break;
    p = bar + 1;
  }
  return -1;
}

/* The k-th choice into buf. */
static const char *choice_text(const char *choices, int k, char *buf, size_t len) {
  const char *p = choices;
  for (; k > 0 && p; k--) {
    p = strchr(p, '|');
    if (p) p++;
  }
  if (!p) p = "";
  const char *bar = strchr(p, '|');
  snprintf(buf, len, "%.*s", (int)(bar ? (size_t)(bar - p) : strlen(p)), p);
  return buf;
}

static bool in_range(const segops_setting *s, int64_t v) { return v >= s->lo && (s->hi == 0 || v <= s->hi); }

/* INT and BYTES rows store an int64_t, or an int where the row's size says so. */
static void store_int(segops_settings_group *g, const segops_setting *s, int64_t v) {
  if (s->size == sizeof(int))
    *FIELD(g, s, int) = (int)v;
  else
    *FIELD(g, s, int64_t) = v;
}

static int64_t load_int(const segops_settings_group *g, const segops_setting *s) {
  return s->size == sizeof(int) ? *CFIELD(g, s, int) : *CFIELD(g, s, int64_t);
}

/* The type's own parse of value into the row's storage; -1 when the value is not allowed. */
static int parse_typed(segops_settings_group *g, const segops_setting *s, const char *v) {
  int64_t i;
  switch (s->type) {
    case SEGOPS_SET_STRING:
      if (strlen(v) >= s->size) return -1;
      snprintf(FIELD(g, s, char), s->size, "%s", v);
      return 0;
    case SEGOPS_SET_BYTES:
    case SEGOPS_SET_INT:
      if ((s->flags & SEGOPS_SET_AUTO) && !strcmp(v, "auto")) {
        store_int(g, s, -1);
        return 0;
      }
      if (parse_count(v, &i) || !in_range(s, i)) return -1;
      store_int(g, s, i);
      return 0;
    case SEGOPS_SET_SECONDS: {
      char *end;
      errno = 0;
      double d = strtod(v, &end);
      if (errno || end == v || *end || !(s->lo > 0 ? d > 0 : d >= 0) || (s->hi && d > (double)s->hi)) return -1;
      *FIELD(g, s, double) = d;
      return 0;
    }
    case SEGOPS_SET_FLAG:
      if (!strcmp(v, "1") || !strcmp(v, "true"))
        *FIELD(g, s, int) = 1;
      else if (!strcmp(v, "0") || !strcmp(v, "false"))
        *FIELD(g, s, int) = 0;
      else
        return -1;
      return 0;
    case SEGOPS_SET_ENUM: {
      int k = choice_index(s->choices, v);
      if (k < 0) return -1;
      if (s->size)
        snprintf(FIELD(g, s, char), s->size, "%s", v);
      else
        *FIELD(g, s, int) = k;
      return 0;
    }
    case SEGOPS_SET_LIST:
      return -1; /* a list always has a parse hook */
  }
  return -1;
}

const char *segops_settings_range(const segops_setting *s, char *buf, size_t len) {
  if (s->range_doc) {
    snprintf(buf, len, "%s", s->range_doc);
    return buf;
  }
  switch (s->type) {
    case SEGOPS_SET_BYTES:
    case SEGOPS_SET_INT: {
      const char *unit = s->type == SEGOPS_SET_BYTES ? " bytes" : "";
      const char *aut = s->flags & SEGOPS_SET_AUTO ? ", or auto" : "";
      if (s->hi)
        snprintf(buf, len, "%" PRId64 " to %" PRId64 "%s%s", s->lo, s->hi, unit, aut);
      else
        snprintf(buf, len, "%" PRId64 "%s or more%s", s->lo, unit, aut);
      return buf;
    }
    case SEGOPS_SET_SECONDS:
      if (s->hi)
        snprintf(buf, len, "%s %" PRId64 " seconds", s->lo > 0 ? "more than 0, up to" : "0 to", s->hi);
      else
        snprintf(buf, len, "%s", s->lo > 0 ? "more than 0 seconds" : "0 seconds or more");
      return buf;
    case SEGOPS_SET_FLAG:
      snprintf(buf, len, "1, 0, true or false");
      return buf;
    case SEGOPS_SET_ENUM: {
      size_t o = 0;
      buf[0] = 0;
      for (const char *p = s->choices; *p && o < len;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        const char *sep = p == s->choices ? "" : bar ? ", " : " or ";
        o += (size_t)snprintf(buf + o, len - o, "%s%.*s", sep, (int)n, p);
        if (!bar) break;
        p = bar + 1;
      }
      return buf;
    }
    case SEGOPS_SET_STRING:
    case SEGOPS_SET_LIST:
      break;
  }
  snprintf(buf, len, "%s", s->metavar ? s->metavar : "text");
  return buf;
}

/* The message for a value a row refuses, naming where it came from (the option or the variable). */
static int refuse(const segops_setting *s, const char *value, bool from_env, char *err, size_t errlen) {
  char range[160];
  segops_settings_range(s, range, sizeof range);
  if (from_env)
    snprintf(err, errlen, "invalid value '%.64s' for %s (--%s): expected %s", value, s->env, s->name, range);
  else
    snprintf(err, errlen, "invalid value '%.64s' for --%s: expected %s", value, s->name, range);
  return -1;
}

/* One value from one source; a hook's own message wins over the generic one. */
static int apply_from(segops_settings_group *g, const segops_setting *s, const char *value, int append, bool from_env,
                      char *err, size_t errlen) {
  if (s->parse) {
    err[0] = 0;
    if (s->parse(g->base, value, append, err, errlen) == 0) return 0;
    if (!err[0]) return refuse(s, value, from_env, err, errlen);
    size_t l = strlen(err);
    if (from_env) snprintf(err + l, errlen - l, " (from %s)", s->env);
    return -1;
  }
  if (parse_typed(g, s, value) == 0) return 0;
  return refuse(s, value, from_env, err, errlen);
}

int segops_settings_apply(segops_settings_group *g, const segops_setting *s, const char *value, int append, char *err,
                          size_t errlen) {
  return apply_from(g, s, value, append, false, err, errlen);
}

int segops_settings_defaults(segops_settings_group *const *groups, char *err, size_t errlen) {
  for (; *groups; groups++)
    for (size_t k = 0; k < (*groups)->n_rows; k++) {
      const segops_setting *s = &(*groups)->rows[k];
      if (s->def && apply_from(*groups, s, s->def, 0, false, err, errlen)) return SEGOPS_SETTINGS_ERROR;
    }
  return SEGOPS_SETTINGS_OK;
}

int segops_settings_from_env(segops_settings_group *const *groups, char *err, size_t errlen) {
  for (; *groups; groups++)
    for (size_t k = 0; k < (*groups)->n_rows; k++) {
      const segops_setting *s = &(*groups)->rows[k];
      const char *v = s->env ? getenv(s->env) : NULL;
      if (v && apply_from(*groups, s, v, 0, true, err, errlen)) return SEGOPS_SETTINGS_ERROR;
    }
  return SEGOPS_SETTINGS_OK;
}

const segops_setting *segops_settings_find(segops_settings_group *const *groups, const char *name, size_t len,
                                           segops_settings_group **group) {
  for (; *groups; groups++)
    for (size_t k = 0; k < (*groups)->n_rows; k++) {
      const segops_setting *s = &(*groups)->rows[k];
      if (strlen(s->name) == len && memcmp(s->name, name, len) == 0) {
        if (group) *group = *groups;
        return s;
      }
    }
  return NULL;
}

int segops_settings_set(segops_settings_group *const *groups, const char *name, const char *value, char *err,
                        size_t errlen) {
  segops_settings_group *g = NULL;
  const segops_setting *s = segops_settings_find(groups, name, strlen(name), &g);
  if (!s) {
    snprintf(err, errlen, "unknown setting '%s'", name);
    return SEGOPS_SETTINGS_ERROR;
  }
  return segops_settings_apply(g, s, value, 0, err, errlen);
}

const char *segops_settings_text(const segops_settings_group *g, const segops_setting *s, char *buf, size_t len) {
  buf[0] = 0;
  if (s->format) {
    s->format(g->base, buf, len);
    if ((s->flags & SEGOPS_SET_SECRET) && buf[0]) snprintf(buf, len, "(set)");
    return buf;
  }
  switch (s->type) {
    case SEGOPS_SET_STRING:
      snprintf(buf, len, "%s", (s->flags & SEGOPS_SET_SECRET) && *CFIELD(g, s, char) ? "(set)" : CFIELD(g, s, char));
      break;
    case SEGOPS_SET_BYTES:
    case SEGOPS_SET_INT: {
      int64_t v = load_int(g, s);
      if (v < 0 && (s->flags & SEGOPS_SET_AUTO))
        snprintf(buf, len, "auto");
      else
        snprintf(buf, len, "%" PRId64, v);
      break;
    }
    case SEGOPS_SET_SECONDS:
      snprintf(buf, len, "%g", *CFIELD(g, s, double));
      break;
    case SEGOPS_SET_FLAG:
      snprintf(buf, len, "%d", *CFIELD(g, s, int));
      break;
    case SEGOPS_SET_ENUM:
      if (s->size)
        snprintf(buf, len, "%s", CFIELD(g, s, char));
      else
        choice_text(s->choices, *CFIELD(g, s, int), buf, len);
      break;
    case SEGOPS_SET_LIST:
      break;
  }
  return buf;
}

int64_t segops_settings_int(const segops_settings_group *g, const segops_setting *s) {
  switch (s->type) {
    case SEGOPS_SET_BYTES:
    case SEGOPS_SET_INT:
      return load_int(g, s);
    case SEGOPS_SET_FLAG:
      return *CFIELD(g, s, int);
    case SEGOPS_SET_ENUM:
      return s->size ? 0 : *CFIELD(g, s, int);
    default:
      return 0;
  }
}

double segops_settings_seconds(const segops_settings_group *g, const segops_setting *s) {
  return s->type == SEGOPS_SET_SECONDS ? *CFIELD(g, s, double) : (double)segops_settings_int(g, s);
}

/* --help's placeholder for a row's value. */
static const char *metavar(const segops_setting *s) {
  if (s->metavar) return s->metavar;
  switch (s->type) {
    case SEGOPS_SET_BYTES:
      return "BYTES";
    case SEGOPS_SET_INT:
      return "N";
    case SEGOPS_SET_SECONDS:
      return "SECONDS";
    case SEGOPS_SET_ENUM:
      return s->choices;
    case SEGOPS_SET_FLAG:
      return NULL;
    default:
      return "VALUE";
  }
}

static const char *default_text(const segops_setting *s) {
  if (s->def_doc) return s->def_doc;
  if (s->type == SEGOPS_SET_FLAG) return !strcmp(s->def, "1") ? "on" : "off";
  return s->def && *s->def ? s->def : "(none)";
}

/* text after a left column of `indent` characters, wrapped at word boundaries to `width`. */
static void print_wrapped(FILE *out, const char *text, int indent, int width) {
  int col = indent;
  for (const char *p = text; *p;) {
    size_t w = strcspn(p, " ");
    if (col > indent && col + 1 + (int)w > width) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', out);
      col++;
    }
    fprintf(out, "%.*s", (int)w, p);
    col += (int)w;
    p += w;
    while (*p == ' ') p++;
  }
  fputc('\n', out);
}

void segops_settings_print_help(segops_settings_group *const *groups, FILE *out) {
  for (; *groups; groups++) {
    const segops_settings_group *g = *groups;
    fprintf(out, "%s:\n", g->title);
    for (size_t k = 0; k < g->n_rows; k++) {
      const segops_setting *s = &g->rows[k];
      char left[96];
      const char *mv = metavar(s);
      if (s->flags & SEGOPS_SET_ENV_ONLY)
        snprintf(left, sizeof left, "[env only]");
      else
        snprintf(left, sizeof left, "--%s%s%s", s->name, mv ? " " : "", mv ? mv : "");
      fprintf(out, "  %-36s ", left);
      print_wrapped(out, s->help, 39, 100);
      fprintf(out, "  %-36s [env %s] default: %s\n", "", s->env, default_text(s));
    }
    fprintf(out, "\n");
  }
}

static const char *type_name(const segops_setting *s) {
  static const char *const NAMES[] = {"string", "bytes", "integer", "seconds", "flag", "list", "enum"};
  return NAMES[s->type];
}

void segops_settings_print_markdown(segops_settings_group *const *groups, const char *preamble, FILE *out) {
  fputs(preamble, out);
  for (; *groups; groups++) {
    const segops_settings_group *g = *groups;
    fprintf(out, "\n## %s\n\n", g->title);
    if (g->intro) fprintf(out, "%s\n\n", g->intro);
    fprintf(out, "| option | variable | type | allowed | default | what it does |\n|---|---|---|---|---|---|\n");
    for (size_t k = 0; k < g->n_rows; k++) {
      const segops_setting *s = &g->rows[k];
      char range[160];
      char opt[80];
      const bool plain = s->def_doc || !s->def || !*s->def || s->type == SEGOPS_SET_FLAG; /* words, not a value */
      if (s->flags & SEGOPS_SET_ENV_ONLY)
        snprintf(opt, sizeof opt, "(environment only)");
      else
        snprintf(opt, sizeof opt, "`--%s`", s->name);
      fprintf(out, "| %s | `%s` | %s | %s | %s%s%s | %s |\n", opt, s->env, type_name(s),
              segops_settings_range(s, range, sizeof range), plain ? "" : "`", default_text(s), plain ? "" : "`",
              s->help);
    }
  }
}
