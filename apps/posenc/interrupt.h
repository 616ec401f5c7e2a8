// Ctrl-C (SIGINT), SIGTERM and SIGHUP end posenc as they would any program,
// but first remove the temporary files of the writes in progress
// (io::remove_temporary_files), so an interrupted command leaves no partial
// file: every output is either its complete new version or untouched.
#pragma once

namespace posenc::cli {

void remove_partial_files_on_signals();

}  // namespace posenc::cli
