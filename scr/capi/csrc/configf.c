/* SCR_Configf: printf-style SCR_Config. C-variadic functions cannot be
 * defined in stable Rust, so this formats in C and calls SCR_Config (Rust).
 *
 * The exported symbol SCR_Configf is a Rust naked function that jumps here
 * (src/lib.rs): rustc exports only Rust-defined symbols from a cdylib, so a C
 * definition of SCR_Configf would be missing from libscr.so. A tail jump
 * leaves the variadic arguments in place. Hidden: not part of the ABI. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "scr.h"

/* Prints the error with the rank SCR_Init recorded (Rust side). */
void scr_capi_report_error(const char* call, const char* message);

__attribute__((visibility("hidden")))
const char* scr_capi_configf_impl(const char* format, ...)
{
  if (format == NULL) {
    scr_capi_report_error("SCR_Configf", "format is NULL");
    return NULL;
  }
  va_list args;
  va_start(args, format);
  int len = vsnprintf(NULL, 0, format, args);
  va_end(args);
  if (len < 0) {
    scr_capi_report_error("SCR_Configf", "vsnprintf failed");
    return NULL;
  }
  char* text = (char*) malloc((size_t) len + 1);
  if (text == NULL) {
    scr_capi_report_error("SCR_Configf", "out of memory");
    return NULL;
  }
  va_start(args, format);
  vsnprintf(text, (size_t) len + 1, format, args);
  va_end(args);
  const char* result = SCR_Config(text);
  free(text);
  return result;
}
