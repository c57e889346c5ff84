# The sum implementation as an R worker (runner "r"): a raw version-1 protocol worker that
# needs R and the jsonlite package only (Debian: r-base-core, r-cran-jsonlite).
#   Rscript sum_worker.R
# It reads requests on METEWAND_PROTOCOL_READ_FD and answers on METEWAND_PROTOCOL_WRITE_FD
# (both inherited pipe descriptors, opened through /dev/fd), one JSON value per line.
# prepare reads data.json and needs algorithm = "sum"; execute writes result.json with the sum
# of the values plus the problem parameter offset (default 0); reset forgets the prepared state.
suppressPackageStartupMessages(library(jsonlite))

descriptor <- function(name) sprintf("/dev/fd/%s", Sys.getenv(name))
requests <- file(descriptor("METEWAND_PROTOCOL_READ_FD"), open = "r")
responses <- file(descriptor("METEWAND_PROTOCOL_WRITE_FD"), open = "wb")

send <- function(message) {
  text <- toJSON(message, auto_unbox = TRUE, null = "null", digits = NA)
  writeBin(charToRaw(paste0(text, "\n")), responses)
  flush(responses)
}

fail <- function(id, text) {
  send(list(id = id, ok = FALSE, error = list(code = "operation_failed", message = text)))
}

prepared <- NULL
repeat {
  line <- readLines(requests, n = 1, warn = FALSE)
  if (length(line) == 0) break
  request <- fromJSON(line, simplifyVector = FALSE)
  id <- request$id
  method <- request$method
  if (method == "hello") {
    send(list(id = id, ok = TRUE, protocol = 1L, sdk = NULL,
              worker_id = request$worker_id, capabilities = list("one_shot")))
  } else if (method == "prepare") {
    if (!identical(request$implementation_parameters$algorithm, "sum")) {
      fail(id, "this implementation needs algorithm = 'sum'")
      next
    }
    data <- fromJSON(file.path(request$dataset_dir, "data.json"))
    offset <- request$problem_parameters$offset
    prepared <- list(values = as.integer(data$values),
                     offset = if (is.null(offset)) 0L else as.integer(offset))
    send(list(id = id, ok = TRUE))
  } else if (method == "execute") {
    if (is.null(prepared)) {
      fail(id, "execute before a successful prepare")
      next
    }
    started <- proc.time()[["elapsed"]]
    answer <- sum(prepared$values) + prepared$offset
    elapsed_ns <- as.integer(round((proc.time()[["elapsed"]] - started) * 1e9))
    result_dir <- request$result_dir
    dir.create(result_dir, showWarnings = FALSE, recursive = TRUE)
    document <- list(data = list(answer = answer), files = list(),
                     schema = "schemas/result.json", schema_version = 1L)
    writeLines(toJSON(document, auto_unbox = TRUE), file.path(result_dir, "result.json"))
    send(list(id = id, ok = TRUE, result = list(manifest = "result.json"),
              statistics = list(input_count = length(prepared$values), language = "R"),
              implementation_time_ns = elapsed_ns))
  } else if (method == "reset") {
    prepared <- NULL
    send(list(id = id, ok = TRUE))
  } else if (method == "shutdown") {
    send(list(id = id, ok = TRUE))
    break
  } else {
    send(list(id = id, ok = FALSE,
              error = list(code = "unsupported_operation", message = paste("no method", method))))
  }
}
