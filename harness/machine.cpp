// PLACEHOLDER so the harness library is not empty; replaced by the machine-info module.
namespace lina::harness {}
