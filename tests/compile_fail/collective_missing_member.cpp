// Must not compile: a collective whose Group lacks all_reduce is named at the
// Trainer, with the member it needs (detail::check_group).
#include <lockstep/lockstep.hpp>

#include <vector>

struct Broken {
  using backend = lockstep::Host;
  static constexpr const char* kName = "Broken";
  class Group : public lockstep::detail::SingleProcess {
   public:
    explicit Group(const std::vector<int>& devices) : size_(static_cast<int>(devices.size())) {}
    int size() const { return size_; }
    void abort() {}

   private:
    int size_;
  };
};

lockstep::Trainer<lockstep::MirroredPolicy<Broken>, lockstep::Adam> t;
