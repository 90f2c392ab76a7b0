! The same hang as stuck.f90, written with the Fortran 2008 bindings
! (`use mpi_f08`, typed handles).
program stuck_f08
  use mpi_f08
  implicit none
  integer :: rank, i, x, y
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  x = 1
  do i = 1, 6
    if (i == 6 .and. rank == 0) then
      print '(a)', 'stuck'
      flush(6)
    end if
    if (i < 6 .or. rank /= 1) call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    if (rank == 0 .and. i < 6) call MPI_Send(x, 1, MPI_INTEGER, 1, 7, MPI_COMM_WORLD)
    if (rank == 1) call MPI_Recv(y, 1, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  end do
  call MPI_Finalize()
end program stuck_f08
