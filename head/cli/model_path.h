// MODEL_DIR arguments that also take a packed single-file model or a qwen35 GGUF file
// (quant/model_source.h): once the command line is parsed, the argument is rewritten to the
// directory the loaders read, the ModelSource kept open (and its view removed) for the life of the
// process.
#pragma once
#include <string>

#include "CLI/CLI.hpp"
#include "quant/model_source.h"

namespace sparkserve::head {

struct ModelPathOptions {
  bool any_file = false;    // leave other plain files as they are (tokenize takes a tokenizer.json)
  bool requantize = false;  // add --requantize RECIPE (GGUF input quantised at load)
};

// Adds the rewrite of `*target` (the value of `opt`, an option of `cmd`) after parsing: a directory
// passes unchanged; a packed file is verified and viewed; a GGUF file dequantised; a failure is a
// parse error naming the problem.
void AcceptModelPath(CLI::App* cmd, CLI::Option* opt, std::string* target, ModelPathOptions options = {});

// The ModelSource whose view is `dir`, or null (a plain directory).
const quant::ModelSource* SourceOfView(const std::string& dir);
// The packed model whose view is `dir`, or null.
const quant::ModelSource* PackedSourceOf(const std::string& dir);

}  // namespace sparkserve::head
