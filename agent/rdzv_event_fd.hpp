#pragma once
// An owned eventfd: a background thread signals it, the run loop blocks on it with poll().

namespace ddprun::agent::rdzv {

class EventFd {
 public:
  EventFd();  // throws std::system_error
  ~EventFd();
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

  int fd() const { return fd_; }
  void signal() const;  // makes fd() readable; safe from any thread
  void drain() const;   // makes it unreadable again

 private:
  int fd_;
};

}  // namespace ddprun::agent::rdzv
