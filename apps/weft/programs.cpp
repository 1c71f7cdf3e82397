#include "programs.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "weft/mgrit/problems/catalogue.hpp"

namespace weft::cli {

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

int run_program(const char* name, char** argv) {
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  std::string path = name;
  if (n > 0) {
    self.resize(static_cast<size_t>(n));
    path = self.substr(0, self.rfind('/') + 1) + name;
  }
  execv(path.c_str(), argv);
  const int error = errno;  // execv returns only on failure
  if (launcher_rank() == 0)
    std::fprintf(stderr, "weft: cannot start %s (%s): %s; it is built and installed with weft\n",
                 name, path.c_str(), std::strerror(error));
  return 1;
}

NetworkRunners& network_runners() {
  static NetworkRunners runners;
  return runners;
}

const char* network_program() {
  return network_runners().train ? nullptr : "weft-nn";
}

const char* heat2d_program() {
#ifdef WEFT_HAVE_PETSC_PROGRAM
  return mgrit::problems::catalogue_has_petsc() ? nullptr : "weft-petsc";
#else
  return nullptr;
#endif
}

}  // namespace weft::cli
