/*
 * check_json.c: `check_json FILE PATH[:CHECK]...` parses FILE with json-c
 * and checks that each dotted PATH ("results.0.uncontended.p50_ns") exists.
 * CHECK is one of: number, int, string, bool, array, object, null (the
 * value's type), pos (a number greater than zero), =TEXT (the value as
 * json-c prints it, strings without quotes: "=true", "=W2"), len=N (an
 * array of N elements), or range=LO,HI (a number from LO to HI, both
 * included). Prints one line per
 * failed check and exits 1 if any failed, 2 if FILE does not parse.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

static json_object *lookup(json_object *root, const char *path, bool *found)
{
    char buf[512], *save = NULL;
    json_object *o = root;

    *found = true;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *k = strtok_r(buf, ".", &save); k != NULL;
         k = strtok_r(NULL, ".", &save)) {
        if (json_object_is_type(o, json_type_array) &&
            isdigit((unsigned char)k[0])) {
            size_t i = strtoul(k, NULL, 10);
            if (i >= json_object_array_length(o)) {
                *found = false;
                return NULL;
            }
            o = json_object_array_get_idx(o, i);
        } else if (json_object_is_type(o, json_type_object)) {
            if (!json_object_object_get_ex(o, k, &o)) {
                *found = false;
                return NULL;
            }
        } else {
            *found = false;
            return NULL;
        }
    }
    return o;
}

static bool check(json_object *v, const char *what)
{
    json_type t = json_object_get_type(v);
    bool num = t == json_type_int || t == json_type_double;

    if (strcmp(what, "number") == 0)
        return num;
    if (strcmp(what, "int") == 0)
        return t == json_type_int;
    if (strcmp(what, "string") == 0)
        return t == json_type_string;
    if (strcmp(what, "bool") == 0)
        return t == json_type_boolean;
    if (strcmp(what, "array") == 0)
        return t == json_type_array;
    if (strcmp(what, "object") == 0)
        return t == json_type_object;
    if (strcmp(what, "null") == 0)
        return t == json_type_null;
    if (strcmp(what, "pos") == 0)
        return num && json_object_get_double(v) > 0;
    if (what[0] == '=')
        return v != NULL && strcmp(json_object_get_string(v), what + 1) == 0;
    if (strncmp(what, "range=", 6) == 0) {
        double lo, hi, x = json_object_get_double(v);
        return num && sscanf(what + 6, "%lf,%lf", &lo, &hi) == 2 && x >= lo &&
               x <= hi;
    }
    if (strncmp(what, "len=", 4) == 0)
        return t == json_type_array &&
               json_object_array_length(v) == strtoul(what + 4, NULL, 10);
    fprintf(stderr, "check_json: unknown check '%s'\n", what);
    return false;
}

int main(int argc, char **argv)
{
    json_object *root;
    int bad = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: check_json FILE PATH[:CHECK]...\n");
        return 2;
    }
    root = json_object_from_file(argv[1]);
    if (root == NULL) {
        fprintf(stderr, "check_json: %s: %s\n", argv[1],
                json_util_get_last_err());
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        char path[512];
        char *colon;
        bool found;
        json_object *v;

        snprintf(path, sizeof path, "%s", argv[i]);
        colon = strchr(path, ':');
        if (colon != NULL)
            *colon++ = '\0';
        v = lookup(root, path, &found);
        if (!found) {
            printf("missing: %s\n", path);
            bad = 1;
        } else if (colon != NULL && !check(v, colon)) {
            printf("wrong: %s is %s, expected %s\n", path,
                   json_object_to_json_string(v), colon);
            bad = 1;
        }
    }
    json_object_put(root);
    return bad;
}
